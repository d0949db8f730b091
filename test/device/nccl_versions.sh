#!/usr/bin/env bash
# Loads ICN through the real NCCL loaders of several NCCL releases on the GPU machine and records, from each
# NCCL's own INFO log, which net / tuner / profiler / env plugin API version it picked.
#   test/device/nccl_versions.sh PLUGIN_SO ENV_SO SRC_DIR
# SRC_DIR holds nccl-<tag>.tar.gz (git archive of NVIDIA/nccl tags); each is built here with src.build for sm_90
# only and ONLY_FUNCS="AllReduce Sum f32 * *" (the one collective the client runs) to keep the build short.
# The NCCL libraries already on the machine (system, PyTorch's wheel) are tested too. Per NCCL: a single-rank
# communicator, then two processes on the one GPU made two nodes with NCCL_HOSTID (P2P/SHM off), so the net
# plugin carries the all-reduce. Writes $OUT/versions.md (the table) and $OUT/<version>.log (raw log lines).
# Exit status 1 when a build or a run failed or erred, NCCL did not load ICN as its net plugin, or no channel went
# through it (test/device/checks.sh); every reason is printed as a FAIL line.
set -u
PLUGIN=$(realpath "$1"); ENVPLUGIN=$(realpath "$2"); SRC=$(realpath "$3")
OUT=${OUT:-/tmp/icn-out}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/checks.sh"
WORK=/tmp/icn-nccl-versions; mkdir -p "$WORK"
export NCCL_NVLS_ENABLE=0 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
date -u +"run: %Y-%m-%d %H:%M UTC" | tee "$OUT/versions.md"
nvidia-smi -L | head -2

g++ -O2 "$HERE/nccl_init.cc" -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64" -lcudart -ldl -o "$WORK/nccl_init" ||
  { device_fail nccl_init "build failed"; device_checks_exit; }

# Builds in parallel (the cores shared out), logs under $WORK.
ntgz=$(ls "$SRC"/nccl-*.tar.gz | wc -l); jobs=$(( $(nproc) / (ntgz > 0 ? ntgz : 1) )); jobs=$(( jobs > 0 ? jobs : 1 ))
for tgz in "$SRC"/nccl-*.tar.gz; do
  tag=$(basename "$tgz" .tar.gz); tag=${tag#nccl-}
  (mkdir -p "$WORK/$tag" && tar -xzf "$tgz" -C "$WORK/$tag" &&
   make -C "$WORK/$tag" -j$jobs src.build NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
        ONLY_FUNCS="AllReduce Sum f32 * *" > "$WORK/$tag.build.log" 2>&1;
   echo "build $tag rc=$? $(date -u +%T)") &
done
wait
for tgz in "$SRC"/nccl-*.tar.gz; do
  tag=$(basename "$tgz" .tar.gz); tag=${tag#nccl-}
  [ -e "$WORK/$tag/build/lib/libnccl.so" ] || device_fail "build $tag" "no libnccl.so (see $WORK/$tag.build.log)"
done
LIBS=()
for d in "$WORK"/v*/build/lib/libnccl.so; do [ -e "$d" ] && LIBS+=("$d"); done
for l in /usr/lib/x86_64-linux-gnu/libnccl.so.2 $(find /opt/torch/.venv -name 'libnccl.so.2' 2>/dev/null | head -1); do
  [ -e "$l" ] && LIBS+=("$(realpath "$l")")
done

pick() {  # log -> "net tuner profiler env" versions NCCL logged
  local f=$1 net tun prof env
  net=$(grep -oE "NET/Plugin: Loaded net plugin ICN \(v[0-9]+\)" "$f" | head -1 | grep -oE "v[0-9]+")
  tun=$(grep -oE "TUNER/Plugin: Using ICN \(v[0-9]+\)" "$f" | head -1 | grep -oE "v[0-9]+")
  prof=$(grep -oE "PROFILER/Plugin: Loaded ICN \(v[0-9]+\)" "$f" | head -1 | grep -oE "v[0-9]+")
  env=$(grep -oE "ENV/Plugin: Using icn \(v[0-9]+\)" "$f" | head -1 | grep -oE "v[0-9]+")
  echo "${net:--} | ${tun:--} | ${prof:--} | ${env:--}"
}

{
  echo
  echo "| NCCL | library | net | tuner | profiler | env | 1 rank | 2 processes (net path) |"
  echo "|---|---|---|---|---|---|---|---|"
} >> "$OUT/versions.md"
for lib in "${LIBS[@]}"; do
  export LD_LIBRARY_PATH=$(dirname "$lib"):$CUDA_HOME/lib64
  common=(NCCL_NET_PLUGIN="$PLUGIN" NCCL_ENV_PLUGIN="$ENVPLUGIN" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,ENV,GRAPH)
  one="$WORK/one.log"
  env "${common[@]}" timeout 60 "$WORK/nccl_init" "$lib" 1 > "$one" 2>&1; rc1=$?
  ver=$(grep -oE "NCCL version [0-9.]+[^ ]*" "$one" | head -1 | awk '{print $3}')
  ver=${ver:-unknown}; name=${ver//+/_}
  two0="$WORK/two0.log"; two1="$WORK/two1.log"; rm -f "$WORK/id"
  pids=()
  for r in 0 1; do
    env "${common[@]}" NCCL_HOSTID=icn-host-$r NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 ICN_TUNER=off \
      timeout 90 "$WORK/nccl_init" "$lib" 2 $r "$WORK/id" > "$WORK/two$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc2a=$?; wait "${pids[1]}"; rc2b=$?
  {
    echo "# NCCL $ver ($lib)"
    echo "## single rank (rc=$rc1)"
    grep -E "NCCL version|Plugin|ICN|NET/|nccl_init|rail=" "$one" | grep -vE "ICN param " | head -40
    echo "## two processes, rank 0 (rc=$rc2a)"
    grep -E "Plugin|ICN|NET/|via NET|nccl_init|[Rr]ail" "$two0" | grep -vE "ICN param " | head -40
    echo "## two processes, rank 1 (rc=$rc2b)"
    grep -E "Plugin|ICN|via NET|nccl_init" "$two1" | grep -vE "ICN param " | head -20
  } > "$OUT/nccl-$name.log"
  net2=$(grep -c "via NET/ICN" "$two0")
  loaded="NET/Plugin: Loaded net plugin ICN"
  check_run "NCCL $ver single rank" "$rc1" "$one" --expect "$loaded" --expect "nccl_init: rank 0 done"
  check_run "NCCL $ver rank 0 of 2" "$rc2a" "$two0" --expect "$loaded" --expect "via NET/ICN" --expect "nccl_init: rank 0 done"
  check_run "NCCL $ver rank 1 of 2" "$rc2b" "$two1" --expect "$loaded" --expect "nccl_init: rank 1 done"
  echo "| $ver | ${lib#$WORK/} | $(pick "$one") | rc $rc1 | rc $rc2a/$rc2b, $net2 channels via NET/ICN |" >> "$OUT/versions.md"
done

# GPU half of GPUDirect: dma-buf export of GPU memory and peermem (no RDMA NIC here).
if g++ -O2 "$HERE/gdr_dmabuf.cc" -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64" -L"$CUDA_HOME/lib64/stubs" -lcuda \
     -o "$WORK/gdr_dmabuf"; then
  "$WORK/gdr_dmabuf" > "$OUT/gdr.log" 2>&1; rc=$?; echo "gdr rc=$rc" >> "$OUT/gdr.log"
  [ "$rc" = 0 ] || device_fail gdr "gdr_dmabuf exited with rc $rc (see $OUT/gdr.log)"
  ls /sys/class/infiniband 2>/dev/null | sed 's/^/gdr: rdma device /' >> "$OUT/gdr.log"
fi
cat "$OUT/versions.md"
device_checks_exit
