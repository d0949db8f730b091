#!/usr/bin/env bash
# Why is a small all-reduce on the net path slower when the ICN tuner picks Tree/LL than with NCCL_ALGO=Tree
# NCCL_PROTO=LL? (tuner proof: 32 B 24.6 us with the learned table vs 16.6 us fixed.) Hypothesis: NCCL connects
# an algorithm's channels on first use (runtime connect), so a run that only ever uses Tree has fewer connections
# for its proxy thread to serve than a run that also used Ring; a tuner that explores both pays for both.
#
#   test/device/net_small_probe.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>
#
# Interleaved repetitions (bimodal small-message latency per process on the test machine: medians only), net path
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), NCCL_NVLS_ENABLE=0, all_reduce_perf -g 2 8 B..8 KiB:
#   tree      NCCL_ALGO=Tree NCCL_PROTO=LL                           (one algorithm connected)
#   tree-rc0  the same with NCCL_RUNTIME_CONNECT=0                   (every algorithm connected at init)
#   treering  NCCL_ALGO=Tree,Ring NCCL_PROTO=LL                      (NCCL picks between two)
#   rules     ICN_TUNER=static, a rules file forcing Tree/LL at every size (the tuner's path, one algorithm)
#   rules2    ICN rules: Tree/LL up to 8 KiB, Ring/Simple above, swept to 1 MiB (the tuner's path, two algorithms)
#   default   NCCL's own choice
# Writes $OUT/net_small_probe.md (median us per size and configuration) and the raw logs.
set -u
SO=$(readlink -f "${1:?usage: net_small_probe.sh <so dir> <nccl-tests build>}/libnccl-net-icn.so")
NT=${2:?usage: net_small_probe.sh <so dir> <nccl-tests build>}
ARP="$NT/all_reduce_perf"
OUT=${OUT:-$PWD/net-small-probe}
REPS=${ICN_PROBE_REPS:-3}
mkdir -p "$OUT/raw"
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET_PLUGIN="$SO"
unset NCCL_ALGO NCCL_PROTO ICN_TUNER ICN_TUNER_CACHE ICN_TUNER_RULES NCCL_RUNTIME_CONNECT
printf 'allreduce,0,-1,tree,ll,-1,-1,-1\n' > "$OUT/rules-tree.csv"
printf 'allreduce,0,8192,tree,ll,-1,-1,-1\nallreduce,8193,-1,ring,simple,-1,-1,-1\n' > "$OUT/rules-two.csv"
one() {  # name rep maxbytes env...
  local name=$1 rep=$2 max=$3; shift 3
  env "$@" timeout 120 "$ARP" -b 8 -e "$max" -f 4 -g 2 -n 50 -w 20 -c 0 > "$OUT/raw/$name-r$rep.txt" 2>&1
  echo "$name r$rep rc=$?"
}
for rep in $(seq 1 "$REPS"); do
  one tree "$rep" 8K ICN_TUNER=off NCCL_ALGO=Tree NCCL_PROTO=LL
  one tree-rc0 "$rep" 8K ICN_TUNER=off NCCL_ALGO=Tree NCCL_PROTO=LL NCCL_RUNTIME_CONNECT=0
  one treering "$rep" 8K ICN_TUNER=off NCCL_ALGO=Tree,Ring NCCL_PROTO=LL
  one rules "$rep" 8K ICN_TUNER=static ICN_TUNER_RULES="$OUT/rules-tree.csv"
  one rules2 "$rep" 1M ICN_TUNER=static ICN_TUNER_RULES="$OUT/rules-two.csv"
  one default "$rep" 8K ICN_TUNER=off
done
python3 - "$OUT" <<'EOF'
import glob, os, re, statistics, sys
out = sys.argv[1]
t = {}
for f in glob.glob(f"{out}/raw/*.txt"):
    name = re.sub(r"-r\d+\.txt$", "", os.path.basename(f))
    for line in open(f, errors="replace"):
        m = re.match(r"\s+(\d+)\s+\d+\s+float\s+sum\s+-?\d+\s+([\d.]+)\s", line)
        if m and int(m.group(1)) <= 8192:
            t.setdefault(name, {}).setdefault(int(m.group(1)), []).append(float(m.group(2)))
names = ["tree", "tree-rc0", "treering", "rules", "rules2", "default"]
sizes = sorted({s for v in t.values() for s in v})
with open(f"{out}/net_small_probe.md", "w") as o:
    o.write("| size | " + " | ".join(names) + " |\n|---:|" + "---:|" * len(names) + "\n")
    for s in sizes:
        cells = []
        for n in names:
            v = t.get(n, {}).get(s, [])
            cells.append(f"{statistics.median(v):.1f} ({len(v)})" if v else "-")
        o.write(f"| {s} | " + " | ".join(cells) + " |\n")
print(open(f"{out}/net_small_probe.md").read())
EOF
