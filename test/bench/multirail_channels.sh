#!/usr/bin/env bash
# NCCL's channels side by side over two rails (lab result on emulated hosts): HOSTS hosts with two links each
# (tools/testbed/icn-testbed --rails 2), each link shaped to RATE; an all-to-all of SIZE messages over CHANNELS
# connections per peer each way, all channels' messages in flight at once (icn-diag-cluster-driver --channels C
# --together 1), every byte checked, SECONDS per run. Each variant (a space-separated list of NAME=VALUE,VALUE...
# settings of the ranks, "-" for none) runs once per round, rounds interleaved; per variant the median rate per host
# (bytes each host sent per second) and its ratio to the two links' capacity.
#   sudo [HOSTS=2] [RATE=1gbit] [SIZE=131072] [CHANNELS=4] [SECONDS=6] [VARIANTS="- ICN_TCP_RAILS=1"] \
#     test/bench/multirail_channels.sh [BUILD_DIR] [ROUNDS]   (defaults: build, 3)
# Prints a Markdown table; raw logs in $ICN_BENCH_OUT (default: a temporary directory).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
HOSTS=${HOSTS:-2}
RATE=${RATE:-1gbit}
SIZE=${SIZE:-131072}
CHANNELS=${CHANNELS:-4}
SECONDS_RUN=${SECONDS:-6}
VARIANTS=${VARIANTS:-"- ICN_TCP_RAILS=1"}
DRIVER=$(realpath "$BUILD/test/diagnose/icn-diag-cluster-driver")
PLUGIN=$(realpath "$BUILD/plugin/libnccl-net-icn.so")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-mrch.XXXXXX)}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnch$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$bed" up --name "$name" --hosts "$HOSTS" --rails 2 >/dev/null
for h in $(seq 0 $((HOSTS - 1))); do for k in 0 1; do "$bed" link --name "$name" "$h" "$k" "$RATE"; done; done

run() {  # run TAG VARIANT: prints iterations per second of rank 0
  local tag=$1 variant=$2 dir="$OUT/$1" pids=() r envs=()
  [ "$variant" = - ] || IFS=',' read -r -a envs <<< "$variant"
  mkdir -p "$dir"
  for r in $(seq 0 $((HOSTS - 1))); do
    "$bed" exec --name "$name" "$r" -- env ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=NET ${envs[@]+"${envs[@]}"} "$DRIVER" --rank "$r" --nranks "$HOSTS" --dir "$dir" \
      --bytes "$SIZE" --seconds "$SECONDS_RUN" --channels "$CHANNELS" --together 1 --plugin "$PLUGIN" \
      > "$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { echo "variant $variant: rank $r failed: $(tail -2 "$dir/rank$r.log")" >&2; exit 1; }
  done
  sed -n 's/^DONE {"rank":0,"iters":\([0-9]*\),"wrong":0,.*/\1/p' "$dir/rank0.log" |
    awk -v s="$SECONDS_RUN" '{ printf "%.1f\n", $1 / s }'
}

declare -A rates
for ((round = 1; round <= ROUNDS; round++)); do
  k=0
  for v in $VARIANTS; do
    rates[$k]+="$(run "r$round.v$k" "$v") "
    k=$((k + 1))
  done
done
python3 - "$HOSTS" "$RATE" "$SIZE" "$CHANNELS" "$OUT" "$VARIANTS" "$(for k in "${!rates[@]}"; do echo "$k:${rates[$k]}"; done)" <<'PY'
import re, statistics, sys
hosts, rate, size, channels, out, variants, rows = sys.argv[1:]
hosts, size, channels = int(hosts), int(size), int(channels)
m = re.match(r"([0-9.]+)(gbit|mbit)", rate)
cap = 2 * float(m.group(1)) * (1e9 if m.group(2) == "gbit" else 1e6) / 8  # two links, bytes/s per host
per_iter = size * channels * (hosts - 1)  # bytes a host sends per iteration
names = variants.split()
got = {int(l.split(":")[0]): [float(x) for x in l.split(":")[1].split()] for l in rows.splitlines() if l}
print(f"{hosts} hosts, two links each shaped to {rate}, {channels} channels side by side, {size} B messages")
print()
print("| variant | iterations/s (rounds) | MB/s per host (median) | vs two links' capacity |")
print("|---|---|---|---|")
for k, name in enumerate(names):
    its = got.get(k, [])
    med = statistics.median(its) if its else 0
    print(f"| {'default' if name == '-' else name} | {', '.join(f'{x:.0f}' for x in its)} | "
          f"{med * per_iter / 1e6:.1f} | {med * per_iter / cap:.2f}x |")
print(f"\nraw logs: {out}")
PY
