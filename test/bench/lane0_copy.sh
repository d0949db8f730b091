#!/usr/bin/env bash
# What lane 0 on two rails costs (transport/tcp/tcp_lane0.h): two emulated hosts with two links each
# (tools/testbed/icn-testbed --rails 2), icn-perf's small-message latency (p50 per size, 8 B to 64 KiB: lane 0's
# messages) and one-way bandwidth at 64 KiB, with lane 0's copy off (ICN_TCP_LANE0_COPY=0) and on (the default),
# and any further settings given as NAME=ENV[,ENV...], interleaved for ROUNDS rounds; medians and the ratio to off.
#   sudo test/bench/lane0_copy.sh [BUILD_DIR] [ROUNDS] [NAME=ENV[,ENV...] ...]
#   (build 3 on-inline16k=ICN_TCP_LANE0_COPY=1,ICN_TCP_INLINE_BYTES=16384)
# Prints a Markdown table; raw logs in $ICN_BENCH_OUT (default: a temporary directory).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
PERF=$(realpath "$BUILD/tools/perf/icn-perf")
PLUGIN=$(realpath "$BUILD/plugin/libnccl-net-icn.so")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-lane0.XXXXXX)}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")" && pwd)/../../tools/testbed/icn-testbed"
name="icnl0$$"
trap '"$bed" down --name "$name" >/dev/null 2>&1 || true' EXIT
"$bed" up --name "$name" --hosts 2 --rails 2 >/dev/null
env=(ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET ICN_LOG_DETAIL=1)
run() {  # run TAG ARGS -- ENV...: the server's table in $OUT/TAG.server.log
  local tag=$1; shift
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  local port=$((20000 + RANDOM % 20000))
  "$bed" exec --name "$name" 0 -- env "${env[@]}" "$@" "$PERF" --plugin "$PLUGIN" --server --port "$port" \
    "${args[@]}" > "$OUT/$tag.server.log" 2>&1 &
  local srv=$!
  for _ in $(seq 100); do grep -q "waiting for the client" "$OUT/$tag.server.log" 2>/dev/null && break; sleep 0.05; done
  "$bed" exec --name "$name" 1 -- env "${env[@]}" "$@" "$PERF" --plugin "$PLUGIN" --client "10.88.0.1:$port" \
    "${args[@]}" > "$OUT/$tag.client.log" 2>&1
  wait "$srv"
}
lat=(--lat-only --min 8 --max 64K --lat-iters 2000)
bw=(--bw-only --min 64K --max 64K --window 8 --bw-bytes 2G)
configs=(off=ICN_TCP_LANE0_COPY=0 on=ICN_TCP_LANE0_COPY=1 "${@:3}")
for ((r = 1; r <= ROUNDS; r++)); do
  for cfg in "${configs[@]}"; do
    tag=${cfg%%=*}
    IFS=, read -r -a envs <<< "${cfg#*=}"
    run "lat.$tag.$r" "${lat[@]}" -- "${envs[@]}"
    run "bw.$tag.$r" "${bw[@]}" -- "${envs[@]}"
  done
done
for cfg in "${configs[@]}"; do  # each connection's log line says whether lane 0 had its copy
  tag=${cfg%%=*}
  echo "$tag (${cfg#*=}): $(cat "$OUT"/lat."$tag".*.log | grep -c "lane 0 also over" || true) connection ends with lane 0's copy"
done
echo
python3 - "$OUT" "$ROUNDS" "${configs[@]%%=*}" <<'EOF'
import statistics, sys
out, rounds, tags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def table(path, col):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) == 5 and f[0].isdigit():
            rows[int(f[0])] = float(f[col])
    return rows
lat = {t: [table(f"{out}/lat.{t}.{r}.server.log", 2) for r in range(1, rounds + 1)] for t in tags}
bw = {t: statistics.median(table(f"{out}/bw.{t}.{r}.server.log", 1)[65536] for r in range(1, rounds + 1)) for t in tags}
med = lambda t, size: statistics.median(x[size] for x in lat[t])
others = tags[1:]
print("| size | p50 latency, off (us) | " + " | ".join(f"{t} (us) | {t} / off" for t in others) + " |")
print("|---" * (2 + 2 * len(others)) + "|")
for size in sorted(lat[tags[0]][0]):
    print(f"| {size} | {med('off', size):.1f} | " +
          " | ".join(f"{med(t, size):.1f} | {med(t, size) / med('off', size):.2f}" for t in others) + " |")
print(f"| 64 KiB bandwidth (GB/s) | {bw['off']:.3f} | " +
      " | ".join(f"{bw[t]:.3f} | {bw[t] / bw['off']:.2f}" for t in others) + " |")
EOF
