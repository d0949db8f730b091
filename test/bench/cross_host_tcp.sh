#!/usr/bin/env bash
# Cross-host TCP benchmark on one Linux machine: two network namespaces joined by a veth pair (MTU 9000, no
# shaping) stand in for two hosts. In each round, one after the other: ICN's tcp transport, ICN over UCX
# (UCX_TLS=tcp), `ucx_perftest -t tag_bw / tag_lat` (UCX_TLS=tcp) and `iperf3 -P 4`, all between the same two
# namespaces. Bandwidth at 1, 4, 16 and 64 MiB, 8-byte half round trip; medians over the rounds.
#
#   sudo test/bench/cross_host_tcp.sh [BUILD_DIR] [ROUNDS]      (defaults: build, 3)
#   ICN_BENCH_VARIANTS="tcp:ICN_TCP_STREAMS=2 ..." adds ICN tcp runs with other settings (name:VAR=V,VAR=V)
#
# Prints a Markdown table on stdout; raw results go to $ICN_BENCH_OUT (default: a temporary directory).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
PERF=$(realpath "$BUILD/tools/perf/icn-perf")
PLUGIN=$(realpath "$BUILD/plugin/libnccl-net-icn.so")
OUT=${ICN_BENCH_OUT:-$(mktemp -d /tmp/icn-bench.XXXXXX)}
mkdir -p "$OUT"
for tool in ip iperf3 ucx_perftest python3; do
  command -v $tool >/dev/null || { echo "missing $tool (bash .ci/deps.sh)" >&2; exit 2; }
done

ID=$$
NSA=icnbA$ID NSB=icnbB$ID VA=icnba$ID VB=icnbb$ID
ADDR_A=10.78.0.1 ADDR_B=10.78.0.2
cleanup() { ip netns del $NSA 2>/dev/null || true; ip netns del $NSB 2>/dev/null || true; }
trap cleanup EXIT
ip netns add $NSA
ip netns add $NSB
ip link add $VA mtu 9000 type veth peer name $VB mtu 9000
ip link set $VA netns $NSA
ip link set $VB netns $NSB
ip -n $NSA addr add $ADDR_A/24 dev $VA
ip -n $NSB addr add $ADDR_B/24 dev $VB
for ns in $NSA $NSB; do ip -n $ns link set lo up; done
ip -n $NSA link set $VA up
ip -n $NSB link set $VB up
inA() { ip netns exec $NSA "$@"; }
inB() { ip netns exec $NSB "$@"; }

SIZES="1048576 4194304 16777216 67108864"
port() { echo $((20000 + RANDOM % 30000)); }

# Waits until a server's log shows its readiness line (bounded).
wait_for() {
  for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "server never became ready: $1" >&2; return 1
}

# icn-perf between the namespaces. $1: result name; $2: icn-perf mode flags; the rest: environment.
icn_perf() {
  local name=$1 flags=$2; shift 2
  local p; p=$(port)
  inA env "$@" ICN_SOCKET_IFNAME=$VA UCX_NET_DEVICES=$VA $PERF --plugin $PLUGIN --server --port $p $flags \
    --json "$OUT/$name.json" > "$OUT/$name.server.log" 2>&1 &
  local srv=$!
  wait_for "$OUT/$name.server.log" "waiting for the client"
  inB env "$@" ICN_SOCKET_IFNAME=$VB UCX_NET_DEVICES=$VB $PERF --plugin $PLUGIN --client $ADDR_A:$p $flags \
    > "$OUT/$name.client.log" 2>&1
  wait $srv
}

# ucx_perftest between the namespaces. $1: result name, the rest: test arguments.
ucx_perf() {
  local name=$1; shift
  local p; p=$(port)
  inA env UCX_TLS=tcp UCX_NET_DEVICES=$VA ucx_perftest -p $p > "$OUT/$name.server.log" 2>&1 &
  local srv=$!
  sleep 0.3
  for _ in $(seq 50); do
    inB env UCX_TLS=tcp UCX_NET_DEVICES=$VB ucx_perftest $ADDR_A -p $p "$@" > "$OUT/$name.log" 2>&1 && break
    sleep 0.1
  done
  wait $srv
}

iperf() {
  local name=$1 p; p=$(port)
  inA iperf3 -s -1 -p $p > "$OUT/$name.server.log" 2>&1 &
  local srv=$!
  sleep 0.3
  inB iperf3 -c $ADDR_A -p $p -P 4 -t 5 -J > "$OUT/$name.json"
  wait $srv
}

uptime > "$OUT/load-start.txt"
VARIANTS="tcp:ICN_TRANSPORT=tcp ucx:ICN_TRANSPORT=ucx,UCX_TLS=tcp,ICN_COPY_THREADS=0 ${ICN_BENCH_VARIANTS:-}"
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for v in $VARIANTS; do
    name=${v%%:*} envs=${v#*:}
    [[ $envs == *ICN_TRANSPORT=* ]] || envs="ICN_TRANSPORT=tcp,$envs"
    IFS=, read -ra e <<< "$envs"
    icn_perf "icn-$name-bw-$r" "--min 1M --max 64M --bw-only --bw-bytes 256M" "${e[@]}"
    icn_perf "icn-$name-lat-$r" "--min 8 --max 8 --lat-only --lat-iters 5000" "${e[@]}"
  done
  for s in $SIZES; do ucx_perf "ucx_perftest-bw-$s-$r" -t tag_bw -s $s -n $(( (1 << 30) / s )); done
  ucx_perf "ucx_perftest-lat-$r" -t tag_lat -s 8 -n 20000
  iperf "iperf3-$r"
done

uptime > "$OUT/load-end.txt"
python3 - "$OUT" "$ROUNDS" "$SIZES" "$VARIANTS" <<'PY'
import json, statistics, sys, os
out, rounds, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split()]
variants = [v.split(":")[0] for v in sys.argv[4].split()]
med = lambda xs: statistics.median(xs) if xs else float("nan")
def icn(name, kind, r):
    with open(f"{out}/icn-{name}-{kind}-{r}.json") as f:
        return {p["bytes"]: p for p in json.load(f)["points"]}
def ucx_final(path):  # "Final:" row: iters, typical/avg/overall latency (us), avg/overall bandwidth (MB/s), ...
    for line in open(path):
        if line.strip().startswith("Final:"):
            return [float(x) for x in line.split()[1:]]
    raise SystemExit(f"no result in {path}")
rows = {}
for v in variants:
    rows[f"ICN tcp ({v})" if v != "ucx" else "ICN ucx (UCX_TLS=tcp)"] = (
        [med([icn(v, "bw", r)[s]["bw_gbps"] for r in range(1, rounds + 1)]) for s in sizes],
        med([icn(v, "lat", r)[8]["lat_p50_us"] for r in range(1, rounds + 1)]))
rows["ucx_perftest tag_bw / tag_lat"] = (
    [med([ucx_final(f"{out}/ucx_perftest-bw-{s}-{r}.log")[5] * 1048576 / 1e9 for r in range(1, rounds + 1)])
     for s in sizes],
    med([ucx_final(f"{out}/ucx_perftest-lat-{r}.log")[1] for r in range(1, rounds + 1)]))
ip = med([json.load(open(f"{out}/iperf3-{r}.json"))["end"]["sum_received"]["bits_per_second"] / 8e9
          for r in range(1, rounds + 1)])
print(f"| | " + " | ".join(f"{s >> 20} MiB GB/s" for s in sizes) + " | 8 B half round trip µs |")
print("|---|" + "---:|" * (len(sizes) + 1))
for k, (bw, lat) in rows.items():
    print(f"| {k} | " + " | ".join(f"{b:.2f}" for b in bw) + f" | {lat:.1f} |")
print(f"| iperf3 -P 4 (5 s) | " + " | ".join(f"{ip:.2f}" for _ in sizes) + " | |")
load = [open(f"{out}/load-{w}.txt").read().split("load average:")[1].split(",")[0].strip() for w in ("start", "end")]
print(f"\n{rounds} interleaved rounds, medians; 1-minute load average {load[0]} before, {load[1]} after; "
      f"raw results in {out}")
PY
