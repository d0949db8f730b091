#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan+UBSan) and runs each for ICN_FUZZ_SECONDS (default 20; the three
# TCP transport fuzzers for ICN_FUZZ_TCP_SECONDS, default 50: 2.5 minutes together, their inputs each set up a comm
# with threads and sockets) from the committed seed corpus. A crash, leak or timeout fails the run and leaves
# crash-*/leak-*/timeout-* under $BUILD/test/fuzz/ (reproduce: $BUILD/test/fuzz/fuzz_<name> <file>).
#   .ci/fuzz.sh                                                 # CI: short bounded run of every fuzzer
#   ICN_FUZZ_SECONDS=300 ICN_FUZZ_TCP_SECONDS=300 .ci/fuzz.sh   # a longer campaign
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-fuzz}
SECONDS_EACH=${ICN_FUZZ_SECONDS:-20}
TCP_SECONDS=${ICN_FUZZ_TCP_SECONDS:-50}
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_FUZZ=ON \
  -DICN_FUZZ_SECONDS="$SECONDS_EACH" -DICN_FUZZ_TCP_SECONDS="$TCP_SECONDS" >/dev/null
cmake --build "$BUILD" -j"${JOBS:-2}" --target icn_fuzzers
rc=0
ctest --test-dir "$BUILD" -L fuzz --output-on-failure -V >"$BUILD/fuzz.log" 2>&1 || rc=$?
grep -E "Test +#|stat::number_of_executed_units|stat::new_units_added|SUMMARY|tests passed" "$BUILD/fuzz.log" || true
if [ "$rc" != 0 ]; then
  # What broke, and each kept input (at most 4 KiB: libFuzzer's default -max_len), so a CI log alone reproduces it:
  #   base64 -d > crash-x <<< '...'; $BUILD/test/fuzz/fuzz_<name> crash-x
  grep -E "INVARIANT BROKEN|ERROR: |#[0-9]+ 0x[0-9a-f]+ in icn::" "$BUILD/fuzz.log" | head -40 || true
  for f in $(ls "$BUILD"/test/fuzz/{crash,leak,timeout,oom}-* 2>/dev/null | head -5); do
    echo "kept input $(basename "$f") ($(stat -c %s "$f") bytes), base64:"
    head -c 4096 "$f" | base64 -w 0
    echo
  done
fi
exit $rc
