#!/usr/bin/env bash
# Exploration: which UCX/NCCL settings move the net-path bandwidth (all_reduce 256M..1G).
set -u
PLUGIN=$(realpath "$1"); NT=$(realpath "$2"); OUT=${OUT:-/tmp/icn-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
v() { local name=$1; shift
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$NT/all_reduce_perf" -g 2 -c 1 -b 64M -e 1G -f 4 -n 5 -w 2 > "$OUT/x_$name.log" 2>&1
  echo "$name rc=$? $(grep -E '^ +[0-9]+ ' "$OUT/x_$name.log" | awk '{printf "%s:%s ", $1, $8}') ch=$(grep -c 'via NET' "$OUT/x_$name.log")"
}
P="NCCL_NET_PLUGIN=$PLUGIN"
v tuneroff $P ICN_TUNER=off
v tuneroff_ch4 $P ICN_TUNER=off NCCL_MIN_NCHANNELS=4
v tuneroff_speed400 $P ICN_TUNER=off ICN_NET_SPEED_MBPS=400000
grep -h "TUNER\|Tuner\|ICN.*tuner" "$OUT/x_tuneroff.log" | head -3
