#!/usr/bin/env bash
# A second outage while lane 0's copy of a rarely used connection is still away (lab result on emulated hosts).
# Two hosts with two links each (tools/testbed/icn-testbed --rails 2); an all-to-all of SIZE messages over two
# connections per peer each way, the second used only every RARE-th iteration (icn-diag-cluster-driver --channels 2
# --rare RARE), as an occasional small collective's connections are; every byte checked. Host 1's eth1 goes down for
# FIRST_S seconds (past ICN_PEER_TIMEOUT_MS, 10 s by default, lane 0's copies over eth1 are dropped), then, GAP_S
# after its return, its eth0 (the handshake's link, lane 0's first copy) for SECOND_S. Prints the longest time
# without an iteration from the second cut until 3 s after its return, and when each copy over eth1 dropped came
# back.
# PEER_TIMEOUT_MS sets the ranks' ICN_PEER_TIMEOUT_MS (FIRST_S must outlast it, SECOND_S must not). With CHECK=1
# it exits 1 unless every dropped copy came back and the stall was at most MAX_STALL_S.
#   sudo [SIZE=262144] [RARE=2500] [FIRST_S=11] [GAP_S=8] [SECOND_S=4] [PEER_TIMEOUT_MS=10000] [CHECK=0] \
#     [MAX_STALL_S=1.5] test/bench/multirail_rare.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
SIZE=${SIZE:-262144}
RARE=${RARE:-2500}
FIRST_S=${FIRST_S:-11}
GAP_S=${GAP_S:-8}
SECOND_S=${SECOND_S:-4}
PEER_TIMEOUT_MS=${PEER_TIMEOUT_MS:-10000}
CHECK=${CHECK:-0}
MAX_STALL_S=${MAX_STALL_S:-1.5}
DRIVER=$(realpath "$BUILD/test/diagnose/icn-diag-cluster-driver")
PLUGIN=$(realpath "$BUILD/plugin/libnccl-net-icn.so")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-rare.XXXXXX)}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnrr$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
set +e
"$bed" up --name "$name" --hosts 2 --rails 2 >/dev/null
rc=$?
set -e
[ "$rc" = 0 ] || exit "$rc"  # 77: no emulated hosts here
ms() { date +%s%3N; }
pids=()
for r in 0 1; do
  "$bed" exec --name "$name" "$r" -- env ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=NET ICN_PEER_TIMEOUT_MS="$PEER_TIMEOUT_MS" "$DRIVER" --rank "$r" --nranks 2 --dir "$OUT" --bytes "$SIZE" --seconds 600 --channels 2 \
    --rare "$RARE" --tick-ms 50 --plugin "$PLUGIN" > "$OUT/rank$r.log" 2>&1 &
  pids+=($!)
done
sleep 4
"$bed" link --name "$name" 1 1 down; sleep "$FIRST_S"; "$bed" link --name "$name" 1 1 up
sleep "$GAP_S"
cut=$(ms); "$bed" link --name "$name" 1 0 down; sleep "$SECOND_S"; "$bed" link --name "$name" 1 0 up; back=$(ms)
sleep 3
touch "$OUT/stop"
for p in "${pids[@]}"; do wait "$p" || { echo "a rank failed: $(tail -2 "$OUT"/rank*.log)" >&2; exit 1; }; done
python3 - "$OUT" "$cut" "$back" "$RARE" "$FIRST_S" "$SECOND_S" "$CHECK" "$MAX_STALL_S" <<'PY'
import glob, json, re, sys
out, cut, back, rare, first, second = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
check, max_stall = sys.argv[7] == "1", float(sys.argv[8])
ticks = [json.loads(l[5:]) for l in open(f"{out}/rank0.log") if l.startswith("TICK ")]
last, gap = None, 0
for t in ticks:
    if t["t"] < cut:
        last = t
        continue
    if t["t"] > back + 3000:
        break
    if last is not None and t["iters"] > last["iters"]:
        gap = max(gap, t["t"] - last["t"])
        last = t
per_s = [b["iters"] - a["iters"] for a, b in zip(ticks, ticks[1:]) if b["t"] < cut]
rate = sum(per_s[-40:]) / (len(per_s[-40:]) * 0.05) if per_s else 0
backs = sorted(float(m.group(1)) for f in glob.glob(f"{out}/rank*.log") for line in open(f)
               for m in [re.search(r"lane 0 over eth1 [-<>]+ \S+ is back, ([0-9.]+) s after", line)] if m)
drops = sum(1 for f in glob.glob(f"{out}/rank*.log") for line in open(f)
            if re.search(r"lane 0 over eth1 .*; lane 0 goes on over|the sender dropped lane 0 over eth1", line))
done = [l for f in sorted(glob.glob(f"{out}/rank*.log")) for l in open(f) if l.startswith("DONE")]
print(f"| rare connection every | eth1 down | eth0 down | longest stall from the eth0 cut | copies over eth1 dropped | back, s after their drop | {' '.join(d.strip() for d in done)} |")
print(f"| {rare} iterations ({float(rare) / rate:.1f} s at {rate:.0f} it/s) | {first} s | {second} s | {gap / 1000:.2f} s | "
      f"{drops} | {', '.join(f'{b:.1f}' for b in backs) or 'none'} |")
print(f"\nraw logs: {out}")
if check:
    wrong = [d for d in done if '"wrong":0,"failed":0' not in d]
    problems = ([f"rank done lines: {done}"] if wrong or len(done) != 2 else []) + \
               (["no lane-0 copy was dropped (the first outage must outlast PEER_TIMEOUT_MS)"] if drops == 0 else []) + \
               ([f"{drops} copies dropped, {len(backs)} back"] if len(backs) < drops else []) + \
               ([f"stall {gap / 1000:.2f} s > {max_stall} s"] if gap / 1000 > max_stall else [])
    for p in problems:
        print(f"multirail.rare: FAIL: {p}")
    sys.exit(1 if problems else 0)
PY
