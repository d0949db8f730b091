#!/usr/bin/env bash
# Multi-rail TCP benchmark on emulated hosts (tools/testbed/icn-testbed --rails 2): the sender's two links shaped
# with tbf to RATE0 and RATE1; icn-perf one-way bandwidth at SIZE over both rails and over the first alone
# (ICN_TCP_RAILS=1), interleaved for ROUNDS rounds; medians, and the ratio to the shaped aggregate.
#   sudo [PLUGIN_SO=other.so] test/bench/multirail_tcp.sh [BUILD_DIR] [ROUNDS] [SIZE] [RATE0] [RATE1]   (build 3 64M 2gbit 1gbit)
# Prints a Markdown table; raw logs in $ICN_BENCH_OUT (default: a temporary directory).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
SIZE=${3:-64M}
RATE0=${4:-2gbit}
RATE1=${5:-1gbit}
PERF=$(realpath "$BUILD/tools/perf/icn-perf")
PLUGIN=$(realpath "${PLUGIN_SO:-$BUILD/plugin/libnccl-net-icn.so}")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-mrbench.XXXXXX)}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnmb$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$bed" up --name "$name" --hosts 2 --rails 2 >/dev/null
"$bed" link --name "$name" 0 0 "$RATE0"
"$bed" link --name "$name" 0 1 "$RATE1"
BYTES=${BW_BYTES:-8G}
env=(ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
run() {  # run TAG ENV...: prints GB/s
  local tag=$1; shift
  local port=$((20000 + RANDOM % 20000))
  "$bed" exec --name "$name" 0 -- env "${env[@]}" "$@" "$PERF" --plugin "$PLUGIN" --server --port "$port" --bw-only \
    --min "$SIZE" --max "$SIZE" --window 8 --bw-bytes "$BYTES" > "$OUT/$tag.server.log" 2>&1 &
  local srv=$!
  for _ in $(seq 100); do grep -q "waiting for the client" "$OUT/$tag.server.log" 2>/dev/null && break; sleep 0.05; done
  "$bed" exec --name "$name" 1 -- env "${env[@]}" "$@" "$PERF" --plugin "$PLUGIN" --client "10.88.0.1:$port" \
    --bw-only --min "$SIZE" --max "$SIZE" --window 8 --bw-bytes "$BYTES" > "$OUT/$tag.client.log" 2>&1
  wait "$srv"
  awk 'NF == 5 && $1 ~ /^[0-9]+$/ { print $2 }' "$OUT/$tag.server.log"
}
two=() one=()
for ((r = 1; r <= ROUNDS; r++)); do
  two+=("$(run two.$r)")
  one+=("$(run one.$r ICN_TCP_RAILS=1)")
  grep -h "carried" "$OUT/two.$r.server.log" | sed 's/.*closed: //' > "$OUT/two.$r.shares"
done
python3 - "$RATE0" "$RATE1" "$SIZE" "${two[*]}" "${one[*]}" "$OUT" <<'PY'
import statistics, sys, re
rate0, rate1, size, two, one, out = sys.argv[1:]
def gbit(r):
    m = re.match(r"([0-9.]+)(gbit|mbit)", r)
    return float(m.group(1)) * (1 if m.group(2) == "gbit" else 1e-3)
agg = (gbit(rate0) + gbit(rate1)) / 8  # GB/s
two = [float(x) for x in two.split()]; one = [float(x) for x in one.split()]
print(f"| rails | {size} GB/s (median of {len(two)}) | rounds | vs shaped aggregate ({agg:.3f} GB/s) |")
print("|---|---|---|---|")
print(f"| eth0 {rate0} + eth1 {rate1} | {statistics.median(two):.3f} | {', '.join(f'{x:.3f}' for x in two)} | {statistics.median(two)/agg:.2f}x |")
print(f"| eth0 {rate0} alone (ICN_TCP_RAILS=1) | {statistics.median(one):.3f} | {', '.join(f'{x:.3f}' for x in one)} | {statistics.median(one)/agg:.2f}x |")
print(f"\nraw logs and each round's shares: {out}")
PY
