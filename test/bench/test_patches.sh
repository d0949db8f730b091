#!/usr/bin/env bash
# Patch-series test: applies nccl-tests-patches/ to a scratch copy of a pristine nccl-tests tree
# (NCCL_TESTS_SRC; the tree itself is never modified), checks what the series adds, that a
# second run is a no-op, and that modified or mismatched trees are refused.
# With --build it also compiles the two new tests (needs nvcc and nccl.h: NCCL_HOME or CUDA_HOME).
# Exit 77 (ctest: skipped) when no tree is given.
set -uo pipefail
patches="$1"; shift
build=0
[[ "${1:-}" == "--build" ]] && build=1

src="${NCCL_TESTS_SRC:-}"
if [[ -z "$src" ]]; then
  echo "SKIPPED: set NCCL_TESTS_SRC (environment or CMake cache) to a pristine checkout of nccl-tests $(awk '$1=="tag"{print $2}' "$patches/PINNED")"
  echo "         e.g. git clone --branch v2.19.6 https://github.com/NVIDIA/nccl-tests && export NCCL_TESTS_SRC=\$PWD/nccl-tests"
  exit 77
fi
if [[ ! -f "$src/src/common.h" ]]; then
  echo "FAIL: NCCL_TESTS_SRC=$src is not an nccl-tests tree (no src/common.h)"
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
check() {  # check <description> <command...>
  local what="$1"; shift
  if "$@"; then echo "ok   - $what"; else echo "FAIL - $what"; fails=$((fails + 1)); fi
}
fresh() {  # fresh <dir>: copy of the pristine tree, build outputs left out
  mkdir -p "$1"
  (cd "$src" && tar --exclude='./build*' -cf - .) | (cd "$1" && tar -xf -)
}

tree="$work/tree"
fresh "$tree"
check "the pristine tree is accepted (--check)" "$patches/apply.sh" --check "$tree"
check "--check changed nothing" test ! -e "$tree/src/mixed_traffic.cu"
check "the series applies" "$patches/apply.sh" "$tree"
for f in src/mixed_traffic.cu src/moe_alltoallv.cu src/netinfo.cu src/netinfo.h src/icn_options.h src/icn_bench_util.h; do
  check "adds $f" test -s "$tree/$f"
done
check "Makefile builds both new tests" grep -Eq '^BIN_FILES_LIST := .* mixed_traffic moe_alltoallv$' "$tree/src/Makefile"
check "CMake builds both new tests" grep -q 'moe_alltoallv' "$tree/src/CMakeLists.txt"
check "common.cu calls the hooks" grep -q 'ncclTestExtraArgs(&argc, argv)' "$tree/src/common.cu"
check "a second run is a no-op" "$patches/apply.sh" "$tree"
out="$("$patches/apply.sh" "$tree" 2>&1)"
check "a second run says so" grep -q "already carries" <<< "$out"

refused() {  # refused <dir>: apply.sh must exit 2 and leave the tree as it was
  local before after
  before="$(cd "$1" && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)"
  "$patches/apply.sh" "$1" >/dev/null 2>&1
  local rc=$?
  after="$(cd "$1" && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)"
  [[ $rc -eq 2 && "$before" == "$after" ]]
}
t2="$work/modified"; fresh "$t2"
echo "// local change" >> "$t2/src/common.cu"
check "a tree with a modified common.cu is refused" refused "$t2"
t3="$work/version"; fresh "$t3"
sed -i 's/^#define NCCL_TESTS_VERSION ".*"/#define NCCL_TESTS_VERSION "2.18.3"/' "$t3/src/common.h"
check "another nccl-tests version is refused" refused "$t3"
t4="$work/notatree"; mkdir -p "$t4"
check "a directory that is not nccl-tests is refused" refused "$t4"
if [[ -d "$src/.git" ]] && command -v git >/dev/null; then
  t5="$work/gitmoved"; fresh "$t5"
  git -C "$t5" -c user.name=t -c user.email=t@t commit -q --allow-empty -m "moved on" 2>/dev/null
  check "a git checkout on another commit is refused" refused "$t5"
else
  echo "note - NCCL_TESTS_SRC has no .git: the commit check was not exercised (file hashes were)"
fi

if [[ $build -eq 1 ]]; then
  nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
  nccl_home="${NCCL_HOME:-${CUDA_HOME:-/usr/local/cuda}}"
  if [[ ! -x "$nvcc" || ! -f "$nccl_home/include/nccl.h" ]]; then
    echo "SKIPPED: the build check needs nvcc ($nvcc) and nccl.h ($nccl_home/include)"
    exit 77
  fi
  b="$work/build"
  check "mixed_traffic_perf and moe_alltoallv_perf compile and link" \
    make -s -C "$tree/src" MPI=0 CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" NCCL_HOME="$nccl_home" BUILDDIR="$b" \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" -j2 "$b/mixed_traffic_perf" "$b/moe_alltoallv_perf"
  check "mixed_traffic_perf lists its own options under -h" \
    bash -c "LD_LIBRARY_PATH='$nccl_home/lib:$nccl_home/lib64:${LD_LIBRARY_PATH:-}' '$b/mixed_traffic_perf' -h | grep -q -- '--burst_bytes'"
  check "moe_alltoallv_perf rejects a bad option value" \
    bash -c "! LD_LIBRARY_PATH='$nccl_home/lib:$nccl_home/lib64:${LD_LIBRARY_PATH:-}' '$b/moe_alltoallv_perf' --zipf abc"
fi

if [[ $fails -ne 0 ]]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
