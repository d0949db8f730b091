#!/usr/bin/env bash
# Link flaps under load, ICN's TCP transport over two rails (lab result on emulated hosts): HOSTS hosts with RAILS
# links each (tools/testbed/icn-testbed --rails RAILS, default 2), an all-to-all of 4 MiB messages with every byte
# checked (icn-diag-cluster-driver, a TICK line per 50 ms), while rail RAIL (default 1) of a host goes down EVENTS
# times, each for a time drawn from 0.5-MAX_S s (seeded; log-uniform when MAX_S > 3), or for the times DOWNS
# lists. With two hosts host 1's link goes down, and the next event comes GAP_S after the link returns; with more,
# a new event starts every GAP_S on the next host whose rail 1 is up, so events overlap (another host's link may
# still be down). Per event: the stall (the longest gap between
# iterations from the link going down until 3 s after it returns, less the usual gap) and, where no link is down
# from its return until 3 s after, the rates from 1 to 2 s and from 2 to 3 s after it returns against the two-rail
# rate before the first event (and, for outages of 2 s or more alone, from 1 s after the cut until the return),
# and the resume: from its return to the first iteration after it. Extra settings of the ranks go in
# RANK_ENV ("ICN_TCP_RTO_MAX_MS=0"). RATE (e.g. 1gbit; default unshaped) shapes every link both ways, so that the
# links and not the machine's cores bound the rate: only then do the rates while down and after a return say what
# the rails do (unshaped, two hosts run as fast on one rail as on two here). CHANNELS (default 1): connections per
# peer each way, the all-to-all run over each in turn (icn-diag-cluster-driver --channels), as NCCL's channels take
# their steps. BYTES (default 4 MiB): each message. PLUGIN_SO: another build of the plugin. Prints a Markdown table.
#   sudo [HOSTS=2] [RAILS=2] [RAIL=1] [MAX_S=3] [DOWNS="2 7"] [GAP_S=4] [CHANNELS=1] [RATE=1gbit] [BYTES=N] \
#     [PLUGIN_SO=...] [RANK_ENV=...] test/bench/multirail_flaps.sh [BUILD_DIR] [EVENTS]   (defaults: build, 30)
set -euo pipefail
BUILD=${1:-build}
EVENTS=${2:-30}
HOSTS=${HOSTS:-2}
MAX_S=${MAX_S:-3}
GAP_S=${GAP_S:-4}
RAILS=${RAILS:-2}
RAIL=${RAIL:-1}
RANK_ENV=${RANK_ENV:-}
CHANNELS=${CHANNELS:-1}
RATE=${RATE:-}
DRIVER=$(realpath "$BUILD/test/diagnose/icn-diag-cluster-driver")
PLUGIN=$(realpath "${PLUGIN_SO:-$BUILD/plugin/libnccl-net-icn.so}")
BYTES=${BYTES:-4194304}
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-flaps.XXXXXX)}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnfl$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$bed" up --name "$name" --hosts "$HOSTS" --rails "$RAILS" >/dev/null
if [ -n "$RATE" ]; then  # a bucket of 4 ms at the rate (icn-testbed link), as the GPU machine's runs shape theirs
  for h in $(seq 0 $((HOSTS - 1))); do for r in $(seq 0 $((RAILS - 1))); do "$bed" link --name "$name" "$h" "$r" "$RATE"; done; done
fi
durations=${DOWNS:-$(python3 -c "
import math, random
r = random.Random(7)
def draw():
    return math.exp(r.uniform(math.log(0.5), math.log($MAX_S))) if $MAX_S > 3 else r.uniform(0.5, $MAX_S)
print(' '.join(f'{draw():.2f}' for _ in range($EVENTS)))")}
if [ "$HOSTS" -gt 2 ]; then
  total=$(python3 -c "print(int(8 + $EVENTS * $GAP_S + $MAX_S + 6))")
else
  total=$(python3 -c "print(int(8 + sum(float(x) + $GAP_S for x in '$durations'.split()) + 2))")
fi
ranks=()
for r in $(seq 0 $((HOSTS - 1))); do
  "$bed" exec --name "$name" "$r" -- env ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
    ICN_TUNER=off ICN_STRAGGLER_REPORT_S=0 ICN_HANG_REPORT_S=0 $RANK_ENV "$DRIVER" --rank "$r" --nranks "$HOSTS" --dir "$OUT" \
    --bytes "$BYTES" --seconds "$total" --tick-ms 50 --channels "$CHANNELS" --plugin "$PLUGIN" > "$OUT/rank$r.log" 2>&1 &
  ranks+=($!)
done
sleep 8
: > "$OUT/events"
flap() {  # HOST SECONDS: rail RAIL of HOST down for SECONDS; appends "down_ms up_ms host" to the events
  local down
  down=$(date +%s%3N)
  "$bed" link --name "$name" "$1" "$RAIL" down
  sleep "$2"
  "$bed" link --name "$name" "$1" "$RAIL" up
  echo "$down $(date +%s%3N) $1" >> "$OUT/events"
}
skipped=0
if [ "$HOSTS" -gt 2 ]; then
  declare -A busy_until
  i=0
  for d in $durations; do
    now=$(date +%s%3N)
    host=""
    for k in $(seq 0 $((HOSTS - 1))); do  # the hosts in turn, the first whose link is up
      h=$(( (i + k) % HOSTS ))
      if [ "${busy_until[$h]:-0}" -lt "$now" ]; then host=$h; break; fi
    done
    if [ -n "$host" ]; then
      busy_until[$host]=$(( now + $(awk -v d="$d" 'BEGIN { printf "%d", d * 1000 }') + 1500 ))
      flap "$host" "$d" &
    else
      skipped=$((skipped + 1))
    fi
    i=$((i + 1))
    sleep "$GAP_S"
  done
else
  for d in $durations; do flap 1 "$d"; sleep "$GAP_S"; done
fi
rc=0
for p in "${ranks[@]}"; do wait "$p" || rc=$?; done
wait
python3 - "$OUT" "$rc" "$skipped" "$RAIL" <<'PY'
import glob, json, re, statistics, sys
out, rc, skipped, rail = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ticks = [json.loads(l.split(" ", 1)[1]) for l in open(f"{out}/rank0.log") if l.startswith("TICK ")]
t = [x["t"] for x in ticks]; it = [x["iters"] for x in ticks]
events = sorted(tuple(map(int, l.split())) for l in open(f"{out}/events"))
def rate(a, b):  # iterations per second in [a, b] ms
    idx = [i for i in range(len(t)) if a <= t[i] <= b]
    if len(idx) < 2: return 0.0
    return (it[idx[-1]] - it[idx[0]]) * 1000.0 / (t[idx[-1]] - t[idx[0]])
base = rate(events[0][0] - 5000, events[0][0])
usual = statistics.median([t[i + 1] - t[i] for i in range(len(t) - 1) if t[i + 1] < events[0][0]])
def quiet(a, b):  # no link down within [a, b]
    return all(up < a or down > b for down, up, _ in events)
stalls, recov, early, during, overlapped, resume = [], [], [], [], [], []
for down, up, host in events:
    after = [i for i in range(1, len(t)) if t[i] >= up and it[i] > it[i - 1]]
    resume.append((t[after[0]] - up) / 1000.0 if after else float("inf"))
    w = [t[i + 1] - t[i] for i in range(len(t) - 1) if t[i + 1] >= down and t[i] <= up + 3000]
    stalls.append(max(0, max(w, default=0) - usual) / 1000.0)
    overlapped.append(any(h != host and u >= down and d <= up + 3000 for d, u, h in events))
    if quiet(up + 1, up + 3000):
        recov.append(rate(up + 2000, up + 3000) / base if base else 0.0)
        early.append(rate(up + 1000, up + 2000) / base if base else 0.0)
    if up - down >= 2000 and len([e for e in events if e[0] < up and e[1] > down]) == 1:
        during.append(rate(down + 1000, up) / base if base else 0.0)
logs = sorted(glob.glob(f"{out}/rank*.log"))
done = [json.loads(l.split(" ", 1)[1]) for f in logs for l in open(f) if l.startswith("DONE")]
wrong = sum(d["wrong"] for d in done)
failed = sum(d["failed"] for d in done) + len(logs) - len(done)
given = sum(len(re.findall(r"WARN ICN TCP connection to .*: lane \d+ on eth" + rail, open(f).read())) for f in logs)
back = sum(open(f).read().count("carries pieces again") for f in logs)
s = sorted(stalls)
p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
outage = sorted((up - down) / 1000.0 for down, up, _ in events)
span = (max(up for _, up, _ in events) - events[0][0]) / 1000.0
def med(xs):  # "median (min) over n"
    return f"{statistics.median(xs):.2f}x ({min(xs):.2f}x) over {len(xs)}" if xs else "-"
print("| ranks | events | down for | over | failed ranks | wrong bytes | stall p50 / p99 / max "
      "| while down (from 1 s after the cut): rate vs two rails, median (min) "
      "| 1-2 s after | 2-3 s after | events >= 0.95x 1-2 s / 2-3 s after | lanes given up / back "
      "| resumed after the return p50 / max |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
print(f"| {len(logs)} | {len(events)} | {outage[0]:.1f}-{outage[-1]:.1f} s (median {statistics.median(outage):.1f}) "
      f"| {span:.0f} s | {failed} (exit {rc}) | {wrong} | {statistics.median(stalls):.2f} / {p99:.2f} / {max(stalls):.2f} s "
      f"| {med(during)} | {med(early)} | {med(recov)} "
      f"| {sum(r >= 0.95 for r in early)}/{len(early)} / {sum(r >= 0.95 for r in recov)}/{len(recov)} | {given} / {back} "
      f"| {statistics.median(resume):.2f} / {max(resume):.2f} s |")
print("\nper event (down for: resumed after the return; rate 0-0.5, 0.5-1, 1-2, 2-3 s after it vs two rails): " +
      ", ".join(f"{(u - d) / 1000.0:.1f} s: {r:.2f} s; " + " ".join(f"{rate(u + a, u + b) / base:.2f}" for a, b in
                ((0, 500), (500, 1000), (1000, 2000), (2000, 3000))) for (d, u, _), r in zip(events, resume)))
if any(overlapped):
    both = [x for x, o in zip(stalls, overlapped) if o]
    alone = [x for x, o in zip(stalls, overlapped) if not o]
    print(f"\n{len(both)} events overlapped another host's (its link down from this one's start until 3 s after its "
          f"end): stall p50 {statistics.median(both):.2f} s, max {max(both):.2f} s, {sum(x > 1.2 for x in both)} over "
          f"1.2 s; the other {len(alone)}: max {max(alone, default=0):.2f} s")
print(f"\ntwo-rail rate before the first event: {base:.0f} iterations/s; events skipped (every "
      f"host's link down): {skipped}; raw data: {out}")
PY
