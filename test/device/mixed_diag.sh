#!/usr/bin/env bash
# Diagnosis of mixed_traffic_perf on one host with 2 GPUs (issue 6): a small mix under several
# launch-order settings and paths, each bounded; logs to $OUT/mixed-*.txt.
#   test/device/mixed_diag.sh <libnccl-net-icn.so> <nccl-tests build dir>
set -u
SO=$(readlink -f "${1:?so}"); NT=${2:?nccl-tests build}
OUT=${OUT:-$PWD/mixed-diag}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
SMALL="--small_ops 32 --bcast_min 64M --bcast_max 128M --bcast_ops 2 --burst_bytes 512M --burst_chunk 128M --rounds 1 --op_timeout 25"
run() {  # name timeout -- env/args
  local name=$1 t=$2; shift 2
  local t0=$(date +%s%N)
  timeout "$t" env "$@" > "$OUT/mixed-$name.txt" 2>&1
  local rc=$?
  printf '%-28s rc=%-3d %6d ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" \
    "$(grep -E '^# (timeout|mixed_traffic_perf: (data|round))|Avg bus|WARN|failure' "$OUT/mixed-$name.txt" | tail -3 | tr '\n' '|')"
}
MT="$NT/mixed_traffic_perf -g 2 -w 1 -c 1"
run nvl-implicit 60 NCCL_NET_PLUGIN=none $MT $SMALL
run nvl-noorder 45 NCCL_NET_PLUGIN=none NCCL_LAUNCH_ORDER_IMPLICIT=0 $MT $SMALL
run nvl-full-implicit 120 NCCL_NET_PLUGIN=none $MT --op_timeout 100
NET=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
run net-socket 90 "${NET[@]}" NCCL_NET_PLUGIN=none NCCL_NET=Socket $MT $SMALL
run net-icn 90 "${NET[@]}" NCCL_NET_PLUGIN="$SO" ICN_TUNER=off NCCL_DEBUG=WARN $MT $SMALL
run net-icn-tuner 90 "${NET[@]}" NCCL_NET_PLUGIN="$SO" NCCL_DEBUG=WARN $MT $SMALL
if grep -q "NCCL WARN\|failure" "$OUT/mixed-net-icn.txt"; then
  run net-icn-info 90 "${NET[@]}" NCCL_NET_PLUGIN="$SO" ICN_TUNER=off NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET $MT $SMALL
fi
