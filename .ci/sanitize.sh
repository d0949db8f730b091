#!/usr/bin/env bash
# Builds the plugin and its test suites with ASan+UBSan (build-asan) and with TSan (build-tsan), then runs
# the unit, conformance, adversary and (fast) reliability tests under each; the ASan build also runs the ib, topo,
# shim and probe tests. UCX itself is not instrumented: the few reports that come from inside UCX are suppressed in
# test/sanitizers/*.supp (each entry says why).
# Leak detection is on in the ASan build: test binaries are checked at exit, forked ranks (test/pair) just before
# their _exit (test/pair/leak_check.h), and the shim's test app (where the shim runs) at its exit.
#   .ci/sanitize.sh            # both
#   .ci/sanitize.sh address    # one of: address thread
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
KINDS=${*:-address thread}
TARGETS="nccl-net-icn icn-conformance icn_core_unit icn_tcp_unit icn_reliability_unit icn-reliability icn_tuner_unit icn_tuner_agree_peer icn_tuner_abi
         icn_tuner_multiproc icn-adversary"
ASAN_TARGETS="icn_ib_tests topo_tests shim_tests icn-probe-tests"
# Tests: unit + conformance labels, the adversary suite (hostile peers against a victim rank), plus the
# reliability suites that finish in seconds.
TESTS='^(core\.|tcp\.|tuner\.|reliability\.(Sha|Hmac|Codec|ListenHandle|HandshakeTest|AuthTest)|reliability\.(garbage|auth|load)$|conformance\.|adversary\.)'
# ASan only: the suites of these labels, and the probe rules.
ASAN_LABELS='^(ib|topo|shim)$'
ASAN_TESTS='^probes\.'
# UCX's own malloc/mmap hooks fight the sanitizers' interceptors.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export ICN_REL_LOAD_SECONDS=${ICN_REL_LOAD_SECONDS:-5}
rc=0
for kind in $KINDS; do
  dir=build-${kind/address/asan}
  dir=${dir/thread/tsan}
  start=$(date +%s)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_SANITIZE="$kind" >/dev/null
  extra=""
  [ "$kind" = address ] && extra=$ASAN_TARGETS
  cmake --build "$dir" -j"${JOBS:-2}" --target $TARGETS $extra
  skip='^$'
  unset GTEST_FILTER
  if [ "$kind" = address ]; then
    # The harness's TCP rendezvous mode of the conformance suite: after the peer-kill case over UCX, LeakSanitizer's
    # own tracer crashes (signal 11 in its stop-the-world) in the check before _exit. The same suite runs here with
    # leak checks over UCX as conformance.ucx.tcp.
    skip='^conformance\.pair-remote-mode$'
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:suppressions=$ROOT/test/sanitizers/asan.supp"
    export LSAN_OPTIONS="suppressions=$ROOT/test/sanitizers/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$ROOT/test/sanitizers/ubsan.supp"
  else
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/test/sanitizers/tsan.supp"
    # PerfShape's receives share one buffer on purpose (as icn-perf's do), so two helper threads write the same
    # bytes: the application's race, which TSan reports. It runs in the ASan pass and the plain build.
    export GTEST_FILTER='-PerfShape.*'
  fi
  if [ "$kind" = address ]; then
    # Suites over the UCX transport run without the leak check: in their forked ranks LeakSanitizer's tracer crashes
    # (signal 11 in its stop-the-world, with UCX's own threads in the process) before it reports anything. ASan and
    # UBSan still check them; the same suites over ICN's TCP transport keep the leak check.
    ctest --test-dir "$dir" -R "$TESTS" -E "$skip|ucx" --output-on-failure -j1 --timeout 900 || rc=1
    ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} \
      ctest --test-dir "$dir" -R '^(conformance|adversary)\..*ucx' -E "$skip" --output-on-failure -j1 --timeout 900 || rc=1
  else
    ctest --test-dir "$dir" -R "$TESTS" -E "$skip" --output-on-failure -j1 --timeout 900 || rc=1
  fi
  if [ "$kind" = address ]; then
    ctest --test-dir "$dir" -L "$ASAN_LABELS" --no-tests=error --output-on-failure -j1 --timeout 900 || rc=1
    ctest --test-dir "$dir" -R "$ASAN_TESTS" --no-tests=error --output-on-failure -j1 --timeout 900 || rc=1
  fi
  echo "sanitize[$kind]: $(( $(date +%s) - start )) s, rc so far $rc"
done
exit $rc
