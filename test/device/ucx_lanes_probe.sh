#!/usr/bin/env bash
# Net path small-message latency on one host (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): is the per-process mode
# (~15 vs ~25 us for an 8 B all-reduce) tied to the UCX lanes our transport's endpoints get?
#
#   test/device/ucx_lanes_probe.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>
#
# Interleaved: UCX's own choice, UCX_TLS=sm,self (shared memory only) and UCX_TLS=tcp,self; all_reduce_perf -g 2
# 8 B..512 B (-f 4, -n 100 -w 50, 3 sweeps), NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET for the lanes line.
# Writes $OUT/ucx_lanes_probe.txt: per process the lanes and the last sweep's out-of-place times.
set -u
SO=$(readlink -f "${1:?usage: ucx_lanes_probe.sh <so dir> <nccl-tests build>}/libnccl-net-icn.so")
ARP="${2:?usage: ucx_lanes_probe.sh <so dir> <nccl-tests build>}/all_reduce_perf"
OUT=${OUT:-$PWD/ucx-lanes-probe}
REPS=${ICN_PROBE_REPS:-4}
mkdir -p "$OUT/raw"
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET_PLUGIN="$SO" ICN_TUNER=off
unset NCCL_ALGO NCCL_PROTO UCX_TLS
one() {  # name rep env...
  local name=$1 rep=$2 f="$OUT/raw/$1-r$2.txt"; shift 2
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 120 "$ARP" -b 8 -e 512 -f 4 -g 2 -n 100 -w 50 -c 0 -N 3 \
    > "$f" 2>&1
  local rc=$?
  local lanes times
  lanes=$(grep -o "uses [^(]*(UCX's choice" "$f" | sed "s/ (UCX's choice//; s/^uses //" | sort -u | tr '\n' ';')
  times=$(grep -E '^ +[0-9]+ +[0-9]+ +float' "$f" | tail -4 | awk '{printf "%s ", $6}')
  printf '%-8s r%s rc=%s  %-40s %s\n' "$name" "$rep" "$rc" "${lanes:-?}" "$times" | tee -a "$OUT/ucx_lanes_probe.txt"
}
for rep in $(seq 1 "$REPS"); do
  one ucx "$rep"
  one sm "$rep" UCX_TLS=sm,self
  one tcp "$rep" UCX_TLS=tcp,self
done
