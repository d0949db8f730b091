#!/usr/bin/env bash
# A/B of net-path all_reduce latency between builds of the plugin (regression check), on one host with
# 2 GPUs: rounds interleave the builds so the per-process bimodality hits each alike; medians per build.
#   test/device/ab_latency.sh <nccl-tests build dir> <name=path/libnccl-net-icn.so>...
# Knobs: AB_ROUNDS (4) AB_ARGS ("-b 8 -e 1M -f 8 -n 50 -w 20"). Raw outputs in $OUT/ab-<name>-r<k>.txt.
set -u
NT=${1:?nccl-tests build dir}; shift
OUT=${OUT:-$PWD/ab-out}; mkdir -p "$OUT"
ROUNDS=${AB_ROUNDS:-4}
ARGS=${AB_ARGS:-"-b 8 -e 1M -f 8 -n 50 -w 20"}
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 ICN_TUNER=off
for r in $(seq 1 "$ROUNDS"); do
  for spec in "$@"; do
    name=${spec%%=*}; so=$(readlink -f "${spec#*=}")
    NCCL_NET_PLUGIN="$so" timeout 120 "$NT/all_reduce_perf" -g 2 -c 0 $ARGS > "$OUT/ab-$name-r$r.txt" 2>&1
  done
done
python3 - "$OUT" "$@" <<'PY'
import glob, statistics, sys, re
out, specs = sys.argv[1], [s.split("=", 1)[0] for s in sys.argv[2:]]
table = {}
for name in specs:
    for f in sorted(glob.glob(f"{out}/ab-{name}-r*.txt")):
        for line in open(f):
            p = line.split()
            if len(p) > 6 and p[0].isdigit() and re.match(r"^[0-9.]+$", p[5]):
                table.setdefault(int(p[0]), {}).setdefault(name, []).append(float(p[5]))
print("size_B " + " ".join(f"{n}_median_us" for n in specs) + "   (runs)")
for size in sorted(table):
    row = table[size]
    cells = [f"{statistics.median(row[n]):.1f}" if n in row else "-" for n in specs]
    runs = "; ".join(f"{n}: " + ",".join(f"{v:.1f}" for v in row.get(n, [])) for n in specs)
    print(f"{size} " + " ".join(cells) + f"   ({runs})")
PY
