#!/usr/bin/env bash
# Final sanity on 2 GPUs, net path forced: all_reduce 8 MiB..1 GiB with ICN as users get it (tuner on), ICN with
# the tuner off, and NCCL Socket; rounds interleaved; busbw per size and run in $OUT/final-*.txt + summary.
#   test/device/final_check.sh <libnccl-net-icn.so> <nccl-tests build dir> [rounds]
set -u
SO=$(readlink -f "$1"); NT=$2; ROUNDS=${3:-2}
OUT=${OUT:-$PWD/final-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
ARGS="-g 2 -b 8M -e 1G -f 8 -n 20 -w 5 -c 1"
for r in $(seq 1 "$ROUNDS"); do
  NCCL_NET_PLUGIN="$SO" timeout 200 "$NT/all_reduce_perf" $ARGS > "$OUT/final-icn-r$r.txt" 2>&1
  NCCL_NET_PLUGIN="$SO" ICN_TUNER=off timeout 200 "$NT/all_reduce_perf" $ARGS > "$OUT/final-icn-off-r$r.txt" 2>&1
  NCCL_NET_PLUGIN=none NCCL_NET=Socket timeout 200 "$NT/all_reduce_perf" $ARGS > "$OUT/final-socket-r$r.txt" 2>&1
done
for f in "$OUT"/final-*.txt; do
  printf '%-22s' "$(basename "$f" .txt)"
  awk '$1 ~ /^[0-9]+$/ && NF > 10 {printf " %s:%s(%s)", $1, $8, $9} /wrong|Out of bounds/ {w=$0} END {print "  " w}' "$f"
done
