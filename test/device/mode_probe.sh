#!/usr/bin/env bash
# Is the per-process small-message latency mode on the test machine (~13 vs ~19 us for an 8 B all-reduce over
# NVLink, ~15 vs ~24 us on the net path, whatever the algorithm) tied to the CPUs the process runs on?
#
#   test/device/mode_probe.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>
#
# all_reduce_perf -g 2 8 B..512 B (-f 4, -n 100 -w 50, 3 sweeps), NCCL's own choice (ICN_TUNER=off, our .so as
# the net plugin), NCCL_NVLS_ENABLE=0, interleaved: unpinned, and under taskset on each quarter of the CPUs.
# Writes $OUT/mode_probe.txt: per process the median of its last sweep's out-of-place times, and the machine's
# CPU topology.
set -u
SO=$(readlink -f "${1:?usage: mode_probe.sh <so dir> <nccl-tests build>}/libnccl-net-icn.so")
NT=${2:?usage: mode_probe.sh <so dir> <nccl-tests build>}
ARP="$NT/all_reduce_perf"
OUT=${OUT:-$PWD/mode-probe}
REPS=${ICN_PROBE_REPS:-2}
mkdir -p "$OUT/raw"
export NCCL_NVLS_ENABLE=0 NCCL_NET_PLUGIN="$SO" ICN_TUNER=off
unset NCCL_ALGO NCCL_PROTO
NCPU=$(nproc)
Q=$(( NCPU / 4 ))
GROUPS_=(none "0-$((Q-1))" "$Q-$((2*Q-1))" "$((2*Q))-$((3*Q-1))" "$((3*Q))-$((NCPU-1))")
{
  echo "== lscpu"; lscpu 2>&1
  echo "== thread siblings"; cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2>/dev/null | sort -u | tr '\n' ' '; echo
  echo "== packages"; cat /sys/devices/system/cpu/cpu*/topology/physical_package_id 2>/dev/null | sort | uniq -c
  echo "== nvidia-smi topo"; nvidia-smi topo -m 2>&1
} > "$OUT/topology.txt"
median() { sort -n | awk '{a[NR]=$1} END{if(NR==0){print "-"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }
one() {  # path group rep
  local path=$1 g=$2 rep=$3 f="$OUT/raw/$1-$2-r$3.txt" penv=() pin=()
  [ "$path" = net ] && penv=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
  [ "$g" != none ] && pin=(taskset -c "$g")
  env "${penv[@]}" timeout 120 "${pin[@]}" "$ARP" -b 8 -e 512 -f 4 -g 2 -n 100 -w 50 -c 0 -N 3 > "$f" 2>&1
  local rc=$?
  # last sweep: the last 4 result rows
  local last
  last=$(grep -E '^ +[0-9]+ +[0-9]+ +float' "$f" | tail -4 | awk '{print $6}' | tr '\n' ' ')
  printf '%-4s cpus %-6s r%s rc=%s  med %s   (%s)\n' "$path" "$g" "$rep" "$rc" \
    "$(echo "$last" | tr ' ' '\n' | grep . | median)" "$last" | tee -a "$OUT/mode_probe.txt"
}
for rep in $(seq 1 "$REPS"); do
  for path in nvl net; do
    for g in "${GROUPS_[@]}"; do one "$path" "$g" "$rep"; done
    one "$path" none "$rep.b"
  done
done
