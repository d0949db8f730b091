#!/usr/bin/env bash
# Builds the plugin and its test suites with ASan+UBSan (build-asan) and with TSan (build-tsan), then runs
# the unit, conformance, adversary and (fast) reliability tests under each. UCX itself is not instrumented: the few
# reports that come from inside UCX are suppressed in test/sanitizers/*.supp (each entry says why).
#   .ci/sanitize.sh            # both
#   .ci/sanitize.sh address    # one of: address thread
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
KINDS=${*:-address thread}
TARGETS="nccl-net-icn icn-conformance icn_core_unit icn_reliability_unit icn-reliability icn_tuner_unit icn_tuner_abi
         icn_tuner_multiproc icn-adversary"
# Tests: unit + conformance labels, the adversary suite (hostile peers against a victim rank), plus the
# reliability suites that finish in seconds.
TESTS='^(core\.|tuner\.|reliability\.(Sha|Hmac|Codec|ListenHandle|HandshakeTest|AuthTest)|reliability\.(garbage|auth|load)$|conformance\.|adversary\.)'
# UCX's own malloc/mmap hooks fight the sanitizers' interceptors.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export ICN_REL_LOAD_SECONDS=${ICN_REL_LOAD_SECONDS:-5}
rc=0
for kind in $KINDS; do
  dir=build-${kind/address/asan}
  dir=${dir/thread/tsan}
  start=$(date +%s)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_SANITIZE="$kind" >/dev/null
  cmake --build "$dir" -j"${JOBS:-2}" --target $TARGETS
  if [ "$kind" = address ]; then
    # Children are forked and leave through _exit (no leak report there); valgrind covers leaks.
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:suppressions=$ROOT/test/sanitizers/asan.supp"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$ROOT/test/sanitizers/ubsan.supp"
  else
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/test/sanitizers/tsan.supp"
  fi
  ctest --test-dir "$dir" -R "$TESTS" --output-on-failure -j1 --timeout 900 || rc=1
  echo "sanitize[$kind]: $(( $(date +%s) - start )) s, rc so far $rc"
done
exit $rc
