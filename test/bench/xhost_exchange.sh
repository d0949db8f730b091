#!/usr/bin/env bash
# NCCL's point-to-point pattern across two emulated hosts (tools/testbed/icn-testbed, MTU 9000, no shaping),
# through the plugin's C ABI: `icn-perf --exchange`, both ranks sending and receiving at once over 2
# connections per direction with 8 requests in flight on each (NCCL's p2p channels and steps), at 128, 256 and
# 512 KiB per message (NCCL_P2P_NET_CHUNKSIZE's default and a tuned value) in one run. Each configuration runs
# with the GPU infinitely fast and with two processes time-sharing one GPU in turns (--slice-us), which is what
# holds step buffers back on a one-GPU machine. Rounds interleave the configurations; medians.
#
#   sudo test/bench/xhost_exchange.sh [BUILD_DIR] [ROUNDS]      (defaults: build, 5)
#   ICN_XCHG_VARIANTS="name:VAR=V,VAR=V ..."  configurations (default: ICN's defaults, and helper-lane eager off)
#   ICN_XCHG_SLICES="0 2000"                   GPU turn lengths in µs (0: no GPU in the way)
#
# Prints a Markdown table on stdout; raw results go to $ICN_BENCH_OUT (default: a temporary directory).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-5}
PERF=$(realpath "$BUILD/tools/perf/icn-perf")
PLUGIN=$(realpath "$BUILD/plugin/libnccl-net-icn.so")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-xchg.XXXXXX)}
mkdir -p "$OUT"
VARIANTS=${ICN_XCHG_VARIANTS:-"default:ICN_TRANSPORT=tcp no-lane-eager:ICN_TCP_LANE_EAGER_BYTES=0"}
SLICES=${ICN_XCHG_SLICES:-"0 2000"}
mkdir -p "$OUT"
bed="$(cd "$(dirname "$0")/../.." && pwd)/tools/testbed/icn-testbed"
name=icnx$$
trap '"$bed" down --name $name >/dev/null 2>&1 || true' EXIT
"$bed" up --name $name --hosts 2 --mtu 9000 >&2
server=$("$bed" addr --name $name 0)

# One icn-perf exchange between the hosts. $1: result name, $2: slice, $3: comma list of VAR=V.
# Ports in sequence from a random base: a random port per run can repeat one still held from an earlier run.
next_port=$((20000 + RANDOM % 20000))
exchange() {
  local res=$1 slice=$2 envs=$3 port=$next_port
  next_port=$((next_port + 1))
  IFS=, read -ra e <<< "ICN_TRANSPORT=tcp,$envs"
  local flags="--exchange --bw-only --min 128K --max 512K --window 8 --conns 2 --bw-bytes 128M --slice-us $slice"
  "$bed" exec --name $name 0 -- env "${e[@]}" "$PERF" --plugin "$PLUGIN" --server --port $port $flags \
    --json "$OUT/$res.json" > "$OUT/$res.server.log" 2>&1 &
  local srv=$!
  for _ in $(seq 200); do grep -q "waiting for the client" "$OUT/$res.server.log" 2>/dev/null && break; sleep 0.05; done
  "$bed" exec --name $name 1 -- env "${e[@]}" "$PERF" --plugin "$PLUGIN" --client "$server:$port" $flags \
    > "$OUT/$res.client.log" 2>&1
  wait $srv
}

uptime > "$OUT/load-start.txt"
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for v in $VARIANTS; do
    for s in $SLICES; do exchange "${v%%:*}-s$s-$r" "$s" "${v#*:}"; done
  done
done
uptime > "$OUT/load-end.txt"

python3 - "$OUT" "$ROUNDS" "$VARIANTS" "$SLICES" <<'PY'
import json, statistics, sys
out, rounds, variants, slices = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
sizes = [128 << 10, 256 << 10, 512 << 10]
def point(name):
    with open(f"{out}/{name}.json") as f:
        return {p["bytes"]: p for p in json.load(f)["points"]}
print("| configuration | GPU turns | " + " | ".join(f"{s >> 10} KiB GB/s (µs/msg)" for s in sizes) +
      " | 128 KiB / 512 KiB |")
print("|---|---|" + "---:|" * (len(sizes) + 1))
for v in variants:
    name, envs = v.split(":", 1)
    for s in slices:
        runs = [point(f"{name}-s{s}-{r}") for r in range(1, rounds + 1)]
        bw = {z: statistics.median(p[z]["bw_gbps"] for p in runs) for z in sizes}
        us = {z: statistics.median(p[z]["msg_us"] for p in runs) for z in sizes}
        ratio = statistics.median(p[sizes[0]]["bw_gbps"] / p[sizes[-1]]["bw_gbps"] for p in runs)
        turns = "none" if s == "0" else f"{int(s) // 1000} ms" if int(s) % 1000 == 0 else f"{s} µs"
        label = name if envs == "ICN_TRANSPORT=tcp" else f"{name} (`{envs.replace(',', ' ')}`)"
        print(f"| {label} | {turns} | " + " | ".join(f"{bw[z]:.2f} ({us[z]:.0f})" for z in sizes) +
              f" | {ratio:.2f} |")
load = [open(f"{out}/load-{w}.txt").read().split("load average:")[1].split(",")[0].strip() for w in ("start", "end")]
print(f"\nPer direction, 2 connections x 8 in flight each way; {rounds} interleaved rounds, medians (the ratio is the "
      f"median of per-run ratios); 1-minute load average {load[0]} before, {load[1]} after; raw results in {out}")
PY
