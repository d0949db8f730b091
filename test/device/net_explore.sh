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
v default $P
v ch8 $P NCCL_MIN_NCHANNELS=8
v ch16 $P NCCL_MIN_NCHANNELS=16
v buf16m $P NCCL_BUFFSIZE=16777216
v buf16m_ch4 $P NCCL_BUFFSIZE=16777216 NCCL_MIN_NCHANNELS=4
v speed400 $P ICN_NET_SPEED_MBPS=400000
v speed800 $P ICN_NET_SPEED_MBPS=800000
v perpeer4 $P NCCL_NCHANNELS_PER_NET_PEER=4
v ch8_copy16 $P NCCL_MIN_NCHANNELS=8 ICN_COPY_THREADS=16
grep -E "via NET" "$OUT/x_speed400.log" | wc -l
