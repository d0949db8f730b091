#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan+UBSan) and runs each for ICN_FUZZ_SECONDS (default 20) from the
# committed seed corpus. A crash leaves crash-<sha1> under build-fuzz/test/fuzz/ and fails the run.
#   .ci/fuzz.sh                 # CI: short bounded run of every fuzzer
#   ICN_FUZZ_SECONDS=300 .ci/fuzz.sh   # a longer campaign
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-fuzz}
SECONDS_EACH=${ICN_FUZZ_SECONDS:-20}
JOBS=${JOBS:-2}
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_FUZZ=ON \
  -DICN_FUZZ_SECONDS="$SECONDS_EACH" >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target icn_fuzzers
ctest --test-dir "$BUILD" -L fuzz --output-on-failure -V | grep -E "stat::number_of_executed_units|Done [0-9]+ runs|Test +#|tests passed|crash-|ERROR" || true
ctest --test-dir "$BUILD" -L fuzz --rerun-failed >/dev/null 2>&1 || true
ctest --test-dir "$BUILD" -L fuzz -N >/dev/null
# The verdict: the first ctest run's result, re-run quietly would hide nothing (crash files are kept).
if ls "$BUILD"/test/fuzz/crash-* "$BUILD"/test/fuzz/leak-* "$BUILD"/test/fuzz/timeout-* >/dev/null 2>&1; then
  echo "fuzz: findings in $BUILD/test/fuzz/" >&2
  exit 1
fi
