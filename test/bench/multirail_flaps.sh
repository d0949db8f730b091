#!/usr/bin/env bash
# Link flaps under load, ICN's TCP transport over two rails (lab result on emulated hosts): two hosts with two links
# each (tools/testbed/icn-testbed --rails 2), an all-to-all of 4 MiB messages with every byte checked
# (icn-diag-cluster-driver, a TICK line per 50 ms), while host 1's rail 1 goes down EVENTS times, each for a time
# drawn from 0.5-3 s (seeded), 4 s apart. Per event: the stall (the longest gap between iterations from the link
# going down until 3 s after it returns, less the usual gap) and the rate from 2 to 3 s after it returns against
# the two-rail rate before the first event. Prints a Markdown table.
#   sudo test/bench/multirail_flaps.sh [BUILD_DIR] [EVENTS]      (defaults: build, 30)
set -euo pipefail
BUILD=${1:-build}
EVENTS=${2:-30}
DRIVER=$(realpath "$BUILD/test/diagnose/icn-diag-cluster-driver")
PLUGIN=$(realpath "$BUILD/plugin/libnccl-net-icn.so")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-flaps.XXXXXX)}
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnfl$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$bed" up --name "$name" --hosts 2 --rails 2 >/dev/null
durations=$(python3 -c "import random; r = random.Random(7); print(' '.join(f'{r.uniform(0.5, 3.0):.2f}' for _ in range($EVENTS)))")
total=$(python3 -c "print(int(8 + sum(float(x) + 4 for x in '$durations'.split()) + 2))")
for r in 0 1; do
  "$bed" exec --name "$name" "$r" -- env ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
    ICN_TUNER=off ICN_STRAGGLER_REPORT_S=0 ICN_HANG_REPORT_S=0 "$DRIVER" --rank "$r" --nranks 2 --dir "$OUT" \
    --bytes 4194304 --seconds "$total" --tick-ms 50 --plugin "$PLUGIN" > "$OUT/rank$r.log" 2>&1 &
done
sleep 8
: > "$OUT/events"
for d in $durations; do
  down=$(date +%s%3N)
  "$bed" link --name "$name" 1 1 down
  sleep "$d"
  "$bed" link --name "$name" 1 1 up
  echo "$down $(date +%s%3N)" >> "$OUT/events"
  sleep 4
done
rc=0
wait || rc=$?
python3 - "$OUT" "$rc" <<'PY'
import json, re, statistics, sys
out, rc = sys.argv[1], int(sys.argv[2])
ticks = [json.loads(l.split(" ", 1)[1]) for l in open(f"{out}/rank0.log") if l.startswith("TICK ")]
t = [x["t"] for x in ticks]; it = [x["iters"] for x in ticks]
events = [tuple(map(int, l.split())) for l in open(f"{out}/events")]
def rate(a, b):  # iterations per second in [a, b] ms
    idx = [i for i in range(len(t)) if a <= t[i] <= b]
    if len(idx) < 2: return 0.0
    return (it[idx[-1]] - it[idx[0]]) * 1000.0 / (t[idx[-1]] - t[idx[0]])
base = rate(events[0][0] - 5000, events[0][0])
gaps_before = [t[i + 1] - t[i] for i in range(len(t) - 1) if t[i + 1] < events[0][0]]
usual = statistics.median(gaps_before)
stalls, recov = [], []
for down, up in events:
    w = [t[i + 1] - t[i] for i in range(len(t) - 1) if t[i + 1] >= down and t[i] <= up + 3000]
    stalls.append(max(0, max(w, default=0) - usual) / 1000.0)
    recov.append(rate(up + 2000, up + 3000) / base if base else 0.0)
done = [l for f in ("rank0", "rank1") for l in open(f"{out}/{f}.log") if l.startswith("DONE")]
wrong = sum(json.loads(l.split(" ", 1)[1])["wrong"] for l in done)
failed = sum(json.loads(l.split(" ", 1)[1])["failed"] for l in done)
given = sum(len(re.findall(r"WARN ICN TCP connection to .*: lane \d+ on eth1", open(f"{out}/{f}.log").read())) for f in ("rank0", "rank1"))
back = sum(open(f"{out}/{f}.log").read().count("carries pieces again") for f in ("rank0", "rank1"))
s = sorted(stalls)
p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
print(f"| events | down for | failed ranks | wrong bytes | stall p50 / p99 / max | after 2 s: rate vs two rails, median (min) | events >= 0.95x | lanes given up / back |")
print("|---|---|---|---|---|---|---|---|")
print(f"| {len(events)} | 0.5-3 s | {failed} (exit {rc}) | {wrong} | {statistics.median(stalls):.2f} / {p99:.2f} / {max(stalls):.2f} s "
      f"| {statistics.median(recov):.2f}x ({min(recov):.2f}x) | {sum(r >= 0.95 for r in recov)}/{len(recov)} | {given} / {back} |")
print(f"\ntwo-rail rate before the first event: {base:.0f} iterations/s (4 MiB each way); raw data: {out}")
PY
