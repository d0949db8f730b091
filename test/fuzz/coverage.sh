#!/usr/bin/env bash
# Source-based coverage (clang -fprofile-instr-generate -fcoverage-mapping) of plugin/transport/tcp/ reached by
# the TCP fuzzers (fuzz_tcp_recv, fuzz_tcp_send, fuzz_tcp_setup), printed as llvm-cov's table.
#   test/fuzz/coverage.sh          # the committed seed corpus only
#   test/fuzz/coverage.sh 45       # the seeds, then what each fuzzer finds in 45 s (as a CI run does)
#   test/fuzz/coverage.sh 0 DIR..  # the seeds plus corpus directories of your own (DIR/tcp_recv, ...)
# Builds build-fuzz-cov (coverage; ASan+UBSan as every fuzz build) and, to fuzz, build-fuzz. Needs clang,
# llvm-profdata and llvm-cov (Debian: apt-get install llvm). The table of the last run is kept in
# build-fuzz-cov/coverage/report.txt. Fuzzing itself runs in the plain fuzz build: an input that aborts (a
# finding) would lose the profile of a whole run, so the coverage build only replays corpora, file by file
# when a replay aborts.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-0}
shift || true
EXTRA=("$@")
COV=${COV_BUILD:-build-fuzz-cov}
FUZZ=${BUILD:-build-fuzz}
OUT=$COV/coverage
FUZZERS=(tcp_recv tcp_send tcp_setup)
for tool in clang++ llvm-profdata llvm-cov; do
  command -v $tool >/dev/null || { echo "$tool is missing (apt-get install clang llvm)"; exit 1; }
done

flags="-fprofile-instr-generate -fcoverage-mapping"
CC=clang CXX=clang++ cmake -S . -B "$COV" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_FUZZ=ON \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null  # C++ links with CMAKE_CXX_FLAGS too
rm -rf "$OUT"
mkdir -p "$OUT/prof"
cmake --build "$COV" -j"${JOBS:-2}" --target "${FUZZERS[@]/#/fuzz_}" >"$OUT/build.log" 2>&1 ||
  { cat "$OUT/build.log"; exit 1; }

if [ "$SECONDS_EACH" -gt 0 ]; then
  CC=clang CXX=clang++ cmake -S . -B "$FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_FUZZ=ON >/dev/null
  cmake --build "$FUZZ" -j"${JOBS:-2}" --target "${FUZZERS[@]/#/fuzz_}" >"$OUT/build-fuzz.log" 2>&1 ||
    { cat "$OUT/build-fuzz.log"; exit 1; }
  # Findings do not stop the run (-fork=1 -ignore_crashes=1): they are listed, the search goes on.
  for f in "${FUZZERS[@]}"; do
    mkdir -p "$OUT/found/$f"
    "$FUZZ/test/fuzz/fuzz_$f" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$OUT/found/$f-" \
      "$OUT/found/$f" "test/fuzz/corpus/$f" >"$OUT/found/$f.log" 2>&1 || true
    for found in "$OUT/found/$f-"*; do [ -e "$found" ] && echo "finding: $found"; done
  done
  EXTRA+=("$OUT/found")
fi

for f in "${FUZZERS[@]}"; do
  dirs=("test/fuzz/corpus/$f")
  for d in "${EXTRA[@]}"; do [ -d "$d/$f" ] && dirs+=("$d/$f"); done
  bin="$COV/test/fuzz/fuzz_$f"
  if ! LLVM_PROFILE_FILE="$OUT/prof/$f-all-%p.profraw" "$bin" -runs=0 "${dirs[@]}" >"$OUT/$f.replay.log" 2>&1; then
    rm -f "$OUT/prof/$f-all-"*.profraw
    for d in "${dirs[@]}"; do
      for input in "$d"/*; do
        LLVM_PROFILE_FILE="$OUT/prof/$f-one-%p.profraw" "$bin" -runs=1 "$input" >/dev/null 2>&1 || true
      done
    done
  fi
  llvm-profdata merge -sparse "$OUT/prof/$f-"*.profraw -o "$OUT/$f.profdata"
done
llvm-profdata merge -sparse "$OUT"/*.profdata -o "$OUT/all.profdata"

# Only plugin/transport/tcp/ as compiled into the library (the harnesses' copies of its inline functions aside).
only_tcp=(-ignore-filename-regex='(plugin/core/|test/fuzz/|^/usr/)')
objects=("$COV/test/fuzz/fuzz_${FUZZERS[0]}")
for f in "${FUZZERS[@]:1}"; do objects+=(-object "$COV/test/fuzz/fuzz_$f"); done
{
  echo "# plugin/transport/tcp/ reached by ${FUZZERS[*]} (seeds${EXTRA:+ + ${EXTRA[*]}}), $(date -u +%Y-%m-%d)"
  llvm-cov report -instr-profile="$OUT/all.profdata" "${objects[@]}" "${only_tcp[@]}" 2>"$OUT/llvm-cov.log"
  echo
  echo "# each fuzzer alone (TOTAL line, same files)"
  for f in "${FUZZERS[@]}"; do
    printf '%-10s ' "$f"
    llvm-cov report -instr-profile="$OUT/$f.profdata" "${objects[@]}" "${only_tcp[@]}" 2>>"$OUT/llvm-cov.log" |
      grep '^TOTAL'
  done
} | tee "$OUT/report.txt"
