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
v rndvinf $P UCX_RNDV_THRESH=inf
v ch8 $P NCCL_MIN_NCHANNELS=8
v ch16 $P NCCL_MIN_NCHANNELS=16
v chunk512k $P NCCL_P2P_NET_CHUNKSIZE=524288
v buf16m $P NCCL_BUFFSIZE=16777216 NCCL_P2P_NET_CHUNKSIZE=1048576
v ch8_rndvinf $P NCCL_MIN_NCHANNELS=8 UCX_RNDV_THRESH=inf
v ch8_buf $P NCCL_MIN_NCHANNELS=8 NCCL_BUFFSIZE=16777216
v posix $P UCX_TLS=posix,cma
v sysvonly $P UCX_TLS=sysv UCX_RNDV_THRESH=inf UCX_MM_SEG_SIZE=65536
v sock_best NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2
grep -E "Channel 0./0 :|nChannels|NET/ICN|via NET" "$OUT/x_default.log" | head -8
