#!/usr/bin/env bash
# valgrind memcheck of the conformance suite and of the plugin-level reliability tests (garbage on the listen
# port, authentication, connect/close cycles), over UCX/TCP. Every process is checked, forked ranks included
# (one log per pid under $LOGS): any memcheck error or definite leak makes that process exit 99, which fails
# its test, and the script also fails when any log reports errors. UCX suppressions: test/sanitizers/valgrind.supp.
#   .ci/valgrind.sh            # uses ./build (configure + build it first)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LOGS=${LOGS:-$BUILD/valgrind-logs}
rm -rf "$LOGS" && mkdir -p "$LOGS"
cmake --build "$BUILD" -j"${JOBS:-2}" --target nccl-net-icn icn-conformance icn-reliability >/dev/null
export ICN_TRANSPORT=ucx UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n
# UCX replaces malloc/mmap hooks, which valgrind must own.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export ICN_REL_CYCLES=${ICN_REL_CYCLES:-150} ICN_REL_LOAD_SECONDS=3
# Everything runs 20-50x slower under memcheck: a close may take 500 ms (one that waits for its peer takes 2 s).
export ICN_CONF_CLOSE_BOUND_MS=500
VG=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --num-callers=30 --suppressions=test/sanitizers/valgrind.supp
    --log-file="$LOGS/%p.log")
rc=0
start=$(date +%s)
"${VG[@]}" "$BUILD"/test/conformance/icn-conformance || rc=1
"${VG[@]}" "$BUILD"/test/reliability/icn-reliability \
  --gtest_filter='ListenPort.*:Keys/AuthPair.*:Leaks.*' || rc=1
bad=$(grep -l "ERROR SUMMARY: [1-9]" "$LOGS"/*.log || true)
procs=$(ls "$LOGS"/*.log | wc -l)
lost=$(grep -h "definitely lost:" "$LOGS"/*.log | awk '{s+=$4} END {print s+0}')
echo "valgrind: $procs processes checked, $(echo "$bad" | grep -c . || true) with errors, definitely lost $lost bytes, $(( $(date +%s) - start )) s"
if [ -n "$bad" ]; then
  for f in $bad; do echo "== $f"; grep -A25 -E "Invalid|uninitialised|definitely lost in" "$f" | head -80; done
  rc=1
fi
exit $rc
