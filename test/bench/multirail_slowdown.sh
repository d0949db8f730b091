#!/usr/bin/env bash
# A rail slowed mid-run, ICN's TCP transport over two rails (lab result on emulated hosts): two hosts with two links
# each, host 1's links shaped with tbf to RATE0 and RATE1 (both directions); an all-to-all of 4 MiB messages with
# every byte checked (icn-diag-cluster-driver, a TICK line per 50 ms); after 10 s rail 1 drops to a tenth of RATE1.
# Prints the rate before, and from 0-1, 1-2 and 2-5 s after the drop, against the shaped capacity then (one
# direction's bytes: each host sends and receives 4 MiB per iteration).
#   sudo [PLUGIN_SO=other.so] test/bench/multirail_slowdown.sh [BUILD_DIR] [RATE0_MBIT] [RATE1_MBIT]    (build 800 400)
set -euo pipefail
BUILD=${1:-build}
R0=${2:-800}
R1=${3:-400}
DRIVER=$(realpath "$BUILD/test/diagnose/icn-diag-cluster-driver")
PLUGIN=$(realpath "${PLUGIN_SO:-$BUILD/plugin/libnccl-net-icn.so}")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-slow.XXXXXX)}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnsl$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$bed" up --name "$name" --hosts 2 --rails 2 >/dev/null
"$bed" link --name "$name" 1 0 "${R0}mbit"
"$bed" link --name "$name" 1 1 "${R1}mbit"
for r in 0 1; do
  "$bed" exec --name "$name" "$r" -- env ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
    ICN_TUNER=off ICN_STRAGGLER_REPORT_S=0 ICN_HANG_REPORT_S=0 "$DRIVER" --rank "$r" --nranks 2 --dir "$OUT" \
    --bytes 4194304 --seconds 17 --tick-ms 50 --plugin "$PLUGIN" > "$OUT/rank$r.log" 2>&1 &
done
sleep 10
slow=$(date +%s%3N)
"$bed" link --name "$name" 1 1 "$((R1 / 10))mbit"
wait
python3 - "$OUT" "$slow" "$R0" "$R1" <<'PY'
import json, sys
out, slow, r0, r1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ticks = [json.loads(l.split(" ", 1)[1]) for l in open(f"{out}/rank0.log") if l.startswith("TICK ")]
def mbit(a, b):
    idx = [i for i, x in enumerate(ticks) if a <= x["t"] <= b]
    if len(idx) < 2: return 0.0
    x, y = ticks[idx[0]], ticks[idx[-1]]
    return (y["iters"] - x["iters"]) * 4 * 8 * 1048576 / 1e6 / ((y["t"] - x["t"]) / 1000.0)
before, after = r0 + r1, r0 + r1 / 10
rows = [("before (4 s)", mbit(slow - 4000, slow), before), ("0-1 s after", mbit(slow, slow + 1000), after),
        ("1-2 s after", mbit(slow + 1000, slow + 2000), after), ("2-5 s after", mbit(slow + 2000, slow + 5000), after)]
print(f"| window | Mbit/s | shaped capacity | ratio |\n|---|---|---|---|")
for name, got, cap in rows: print(f"| {name} | {got:.0f} | {cap:.0f} | {got / cap:.2f}x |")
done = [json.loads(l.split(" ", 1)[1]) for f in ("rank0", "rank1") for l in open(f"{out}/{f}.log") if l.startswith("DONE")]
print(f"\nwrong bytes {sum(d['wrong'] for d in done)}, failed ranks {sum(d['failed'] for d in done)}; raw data: {out}")
PY
