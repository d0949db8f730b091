#!/usr/bin/env bash
# Net path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), small all-reduce: does it slow down once NCCL has connected
# Tree for larger sizes, and is the cost ours (ICN net plugin: one comm and UCP worker per connection) or NCCL's
# (its proxy)? NCCL connects an algorithm the first time a call uses it, so a sweep that stops at 8 KiB (NCCL's
# default runs Ring/LL there) never connects Tree, and one that goes on to 32 MiB does.
#
#   test/device/net_connset_probe.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>
#
# all_reduce_perf -g 2 -f 4 -n 50 -w 20, 3 sweeps per process (the last is reported), interleaved repetitions:
#   icn-8k      ICN, NCCL's choice (ICN_TUNER=off), 8 B..8 KiB
#   icn-32m     the same, 8 B..32 MiB
#   icn-32m-r   the same with NCCL_ALGO=Ring (larger sizes without Tree)
#   sock-8k     NCCL's Socket transport, 8 B..8 KiB
#   sock-32m    NCCL's Socket transport, 8 B..32 MiB
# Writes $OUT/net_connset_probe.md: median out-of-place time per size (8 B..8 KiB) and configuration.
set -u
SO=$(readlink -f "${1:?usage: net_connset_probe.sh <so dir> <nccl-tests build>}/libnccl-net-icn.so")
ARP="${2:?usage: net_connset_probe.sh <so dir> <nccl-tests build>}/all_reduce_perf"
OUT=${OUT:-$PWD/net-connset-probe}
REPS=${ICN_PROBE_REPS:-4}
mkdir -p "$OUT/raw"
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
unset NCCL_ALGO NCCL_PROTO ICN_TUNER_CACHE ICN_TUNER_RULES NCCL_RUNTIME_CONNECT
one() {  # name rep maxbytes env...
  local name=$1 rep=$2 max=$3; shift 3
  env "$@" timeout 180 "$ARP" -b 8 -e "$max" -f 4 -g 2 -n 50 -w 20 -c 0 -N 3 > "$OUT/raw/$name-r$rep.txt" 2>&1
  echo "$name r$rep rc=$?"
}
for rep in $(seq 1 "$REPS"); do
  one icn-8k "$rep" 8K NCCL_NET_PLUGIN="$SO" ICN_TUNER=off
  one icn-32m "$rep" 32M NCCL_NET_PLUGIN="$SO" ICN_TUNER=off
  one icn-32m-r "$rep" 32M NCCL_NET_PLUGIN="$SO" ICN_TUNER=off NCCL_ALGO=Ring
  one sock-8k "$rep" 8K NCCL_NET_PLUGIN=none NCCL_NET=Socket
  one sock-32m "$rep" 32M NCCL_NET_PLUGIN=none NCCL_NET=Socket
done
python3 - "$OUT" <<'PY'
import os, re, statistics, sys
out = sys.argv[1]
row = re.compile(r"^\s*(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([0-9.]+)")
cfgs = ["icn-8k", "icn-32m", "icn-32m-r", "sock-8k", "sock-32m"]
times = {c: {} for c in cfgs}
for name in sorted(os.listdir(os.path.join(out, "raw"))):
    m = re.match(r"^(.+)-r\d+\.txt$", name)
    if not m or m.group(1) not in times:
        continue
    last = {}
    for line in open(os.path.join(out, "raw", name), errors="replace"):
        r = row.match(line)
        if r:
            last[int(r.group(1))] = float(r.group(2))  # later sweeps overwrite earlier ones
    for size, t in last.items():
        if size <= 8192:
            times[m.group(1)].setdefault(size, []).append(t)
lines = ["# Net path small all-reduce vs the connections made (median us of the last sweep, runs in brackets)", "",
         "| size | " + " | ".join(cfgs) + " |", "|---:|" + "---:|" * len(cfgs)]
for size in sorted({s for c in cfgs for s in times[c]}):
    cells = [f"{statistics.median(times[c][size]):.1f} ({len(times[c][size])})" if times[c].get(size) else "-"
             for c in cfgs]
    lines.append(f"| {size} | " + " | ".join(cells) + " |")
open(os.path.join(out, "net_connset_probe.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
