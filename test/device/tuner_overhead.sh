#!/usr/bin/env bash
# Does an active tuner cost time per call? Inside one process (icn-paired-allreduce, NVLink, 8 B..1 MiB, 40
# interleaved rounds; 2 MiB is run too), the same choice (Ring/LL) reached five ways: NCCL_ALGO/NCCL_PROTO with ICN's tuner off (the
# reference), NCCL's own choice with the tuner off, a rules file, a learned table replayed (ICN_TUNER=static) and
# the same table under ICN_TUNER=online (settled from the first call), plus the tuner active with nothing to say,
# and a rules file that also runs 2 MiB on Tree/SIMPLE (does a communicator that connected Tree pay on small calls?).
# Prints each configuration's time over the reference's in the same round, median over rounds, then processes.
#
#   test/device/tuner_overhead.sh <dir with libnccl-net-icn.so> <icn-paired-allreduce binary>
# Env: OUT (results), ICN_OVERHEAD_PROCS (3), ICN_OVERHEAD_ROUNDS (40).
# Exit status 1 when a process failed, erred or wrote no results, or the table could not be made
# (test/device/checks.sh); every reason is printed as a FAIL line.
set -u
. "$(dirname "$0")/checks.sh"
SO=$(readlink -f "${1:?usage: tuner_overhead.sh <so dir> <icn-paired-allreduce>}/libnccl-net-icn.so")
BIN=$(readlink -f "${2:?usage: tuner_overhead.sh <so dir> <icn-paired-allreduce>}")
OUT=${OUT:-$PWD/tuner-overhead}
PROCS=${ICN_OVERHEAD_PROCS:-3}
ROUNDS=${ICN_OVERHEAD_ROUNDS:-40}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_NET_PLUGIN="$SO"
unset NCCL_ALGO NCCL_PROTO ICN_TUNER ICN_TUNER_CACHE ICN_TUNER_RULES ICN_HEATMAP_FILE
echo "allreduce,0,1048576,ring,ll,-1,-1,-1" > "$OUT/ring_ll.csv"
printf 'allreduce,0,1048576,ring,ll,-1,-1,-1\nallreduce,1048577,4194304,tree,simple,-1,-1,-1\n' > "$OUT/ring_ll_tree.csv"
table() {  # a learned table with Ring/LL for 2^3..2^20
  echo "# icn-tuner-cache v1"
  echo "coll,nRanks,nNodes,bucket_log2,algo,proto,channels,mean_us,samples"
  for b in $(seq 3 20); do echo "AllReduce,2,1,$b,RING,LL,0,13.0,10"; done
}
for k in $(seq 1 "$PROCS"); do
  table > "$OUT/static-p$k.csv"
  table > "$OUT/online-p$k.csv"
  timeout 300 "$BIN" -b 8 -e 2M -f 4 -n 20 -w 5 -l 1 -L 40 -r "$ROUNDS" -o "$OUT/overhead-p$k.json" \
    "Ring-LL:ICN_TUNER=off,NCCL_ALGO=Ring,NCCL_PROTO=LL" \
    "default:ICN_TUNER=off" \
    "rules:ICN_TUNER=static,ICN_TUNER_RULES=$OUT/ring_ll.csv" \
    "static-table:ICN_TUNER=static,ICN_TUNER_CACHE=$OUT/static-p$k.csv" \
    "online-table:ICN_TUNER=online,ICN_TUNER_CACHE=$OUT/online-p$k.csv" \
    "static-empty:ICN_TUNER=static" \
    "rules-tree-2M:ICN_TUNER=static,ICN_TUNER_RULES=$OUT/ring_ll_tree.csv" > "$OUT/overhead-p$k.log" 2>&1
  rc=$?
  echo "[tuner-overhead] process $k: rc=$rc"
  check_run "overhead p$k" "$rc" "$OUT/overhead-p$k.log"
  [ -s "$OUT/overhead-p$k.json" ] || device_fail "overhead p$k" "no results (overhead-p$k.json missing)"
done
python3 - "$OUT" <<'PY' | tee "$OUT/overhead.md"
import glob, json, statistics as st, sys
procs = []
for f in sorted(glob.glob(sys.argv[1] + "/overhead-p*.json")):
    procs.append({c["name"]: {int(s): v for s, v in c["us"].items()} for c in json.load(open(f))["configs"]})
if not procs:
    sys.exit("no results")
names = [n for n in procs[0] if n != "Ring-LL"]
print(f"time / Ring-LL (NCCL_ALGO/NCCL_PROTO, tuner off) in the same round; median over rounds, then {len(procs)} processes\n")
print("| size | Ring-LL (us) | " + " | ".join(names) + " |")
print("|---:|---:|" + "---:|" * len(names))
for s in sorted(procs[0]["Ring-LL"]):  # 2 MiB: rules-tree-2M runs Tree/SIMPLE there, the others their own
    ref = st.median(st.median(p["Ring-LL"][s]) for p in procs)
    cells = [st.median(st.median(a / b for a, b in zip(p[n][s], p["Ring-LL"][s])) for p in procs) for n in names]
    print(f"| {s} | {ref:.2f} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
PY
[ "${PIPESTATUS[0]}" = 0 ] || device_fail table "overhead table failed (reason above)"
device_checks_exit
