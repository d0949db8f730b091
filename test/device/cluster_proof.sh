#!/usr/bin/env bash
# A GPU cluster on one GPU: N processes share the GPU under CUDA MPS (so their kernels run at the same time), each
# in its own emulated host (tools/testbed/icn-testbed: network + UTS + mount namespaces, veth through a bridge,
# MTU 9000, NCCL_HOSTID per host), so NCCL sees N nodes with one GPU each and every byte between ranks crosses the
# network plugin. ICN with every default against NCCL's Socket transport at each setting, process groups
# interleaved round by round (test/device/cluster_bench.cc); iperf3 measures the links' raw TCP capacity.
#
#   OUT=dir test/device/cluster_proof.sh PLUGIN_SO NETTOOLS_DIR BENCH_BIN [BENCH ARGS...]
# Env: NODES ("2 4 8"), ROUNDS (3: process groups per configuration), GROUPS_ (comma list of icn, icn-off,
#      socket-default, socket-2x2, socket-4x4, socket-8x2; a group may add variables after '+'), RATE (tbf rate
#      of every host link, e.g. 10gbit; empty: unshaped), MODE (compare | tuner: one ICN process group per node
#      count with NCCL's default, the six fixed algorithm x protocol choices and the online tuner as communicators
#      of the same processes, after LEARN sweeps of 40 untimed calls).
# Writes $OUT/results.txt (CLUSTER lines), $OUT/cluster.log (discovery lines per run), $OUT/summary.md.
# Exit status 1 when a rank failed or erred (test/device/checks.sh), did not use the network asked for, printed no
# results, or counted wrong elements; every reason is printed as a FAIL line. MPS and the hosts are always removed.
set -uo pipefail
PLUGIN=$(realpath "$1"); TOOLS=$(realpath "$2"); BENCH=$(realpath "$3")
shift 3
BENCH_ARGS=("$@")
OUT=${OUT:-/tmp/icn-cluster}; mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/checks.sh"
export IP="$TOOLS/ip" TC="$TOOLS/tc"
bed="$here/../../tools/testbed/icn-testbed"
NODES=${NODES:-"2 4 8"}
ROUNDS=${ROUNDS:-3}
GROUPS_=${GROUPS_:-icn,socket-default,socket-2x2,socket-4x4,socket-8x2}
MODE=${MODE:-compare}
LEARN=${LEARN:-30}
name=icnc

export CUDA_MPS_PIPE_DIRECTORY=/tmp/icn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/icn-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
cleanup() {
  "$bed" down --name $name >/dev/null 2>&1
  device_mps_quit
}
trap cleanup EXIT
nvidia-cuda-mps-control -d || { device_fail mps "nvidia-cuda-mps-control -d failed"; device_checks_exit; }

group_env() {
  local base=${1%%+*} extra=""
  [ "$base" = "$1" ] || extra=" ${1#*+}"
  case "$base" in
    icn) echo -n "NCCL_NET_PLUGIN=$PLUGIN" ;;
    icn-off) echo -n "NCCL_NET_PLUGIN=$PLUGIN ICN_TUNER=off" ;;
    socket-default) echo -n "NCCL_NET_PLUGIN=none NCCL_NET=Socket" ;;
    socket-2x2) echo -n "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2" ;;
    socket-4x4) echo -n "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4" ;;
    socket-8x2) echo -n "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=8 NCCL_NSOCKS_PERTHREAD=2" ;;
    *) echo "unknown group $1" >&2; return 1 ;;
  esac
  echo "${extra//+/ }"
}

capacity() {  # n: raw TCP between host 1 and host 0, n parallel iperf3 processes of one stream
  local n=$1 nodes=$2 i
  for i in $(seq 1 "$n"); do "$bed" exec --name $name 0 -- "$TOOLS/iperf3" -s -1 -p $((5200 + i)) >/dev/null 2>&1 & done
  sleep 1
  for i in $(seq 1 "$n"); do
    "$bed" exec --name $name 1 -- "$TOOLS/iperf3" -c 10.88.0.1 -p $((5200 + i)) -t 3 -J > "$OUT/iperf_$i.json" 2>/dev/null &
  done
  wait
  python3 - "$n" "$nodes" "${RATE:-}" "$OUT"/iperf_*.json <<'PY' >> "$OUT/results.txt"
import json, sys
n, nodes, rate, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
gbs = sum(json.load(open(f))["end"]["sum_received"]["bits_per_second"] / 8e9 for f in files)
print("CLUSTER " + json.dumps({"label": "iperf3", "nranks": nodes, "rate": rate, "streams": n, "gbs": gbs}))
PY
  [ "${PIPESTATUS[0]}" = 0 ] || device_fail "iperf3 $n" "no capacity measured"
  rm -f "$OUT"/iperf_*.json
}

# run_group NODES ROUND GROUP CONFIG...: one process per node, all at once; checks every rank's log.
run_group() {
  local nodes=$1 round=$2 group=$3; shift 3
  local envs tag ids pids=() rcs=() rank p rc=0
  envs=$(group_env "$group") || exit 2
  tag="n${nodes}_r${round}_${group//[^A-Za-z0-9_.=-]/_}"
  ids="$OUT/ids_$tag"; rm -f "$ids"
  for rank in $(seq 0 $((nodes - 1))); do
    # shellcheck disable=SC2086
    "$bed" exec --name $name "$rank" -- env $envs NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING \
      ICN_TUNER_RENDEZVOUS="$OUT/rdv" timeout ${RUN_TIMEOUT:-150} "$BENCH" -r "$rank" -N "$nodes" -i "$ids" \
      -t "$group${RATE:+@$RATE}" "${BENCH_ARGS[@]}" "$@" > "$OUT/run_${tag}_rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; local st=$?; rcs+=("$st"); [ "$st" = 0 ] || rc=$st; done
  local used="Using network ICN"
  [[ $group == socket* ]] && used="Using network Socket"
  for rank in $(seq 0 $((nodes - 1))); do
    local extra=()
    [ "$rank" = 0 ] && extra=(--expect "^CLUSTER .*\"us\"")
    check_run "$tag rank $rank" "${rcs[$rank]}" "$OUT/run_${tag}_rank$rank.log" --expect "$used" \
      --expect "nNodes $nodes localRanks 1" "${extra[@]}"
  done
  grep -h "^CLUSTER" "$OUT/run_${tag}_rank"*.log | sed "s|^CLUSTER {|CLUSTER {\"round_group\": $round, |" >> "$OUT/results.txt"
  {
    echo "== $tag rc=$rc"
    grep -hE "NET/Plugin|Using network|nNodes|ICN transport|ICN TCP .*ready|TCP device|Channel 00/0|TUNER/Plugin|ICN tuner|WARN" \
      "$OUT/run_${tag}_rank"*.log | sed 's/^[^ ]* //' | sort | uniq -c | sort -rn | head -20
    grep -h "connection .* closed:" "$OUT/run_${tag}_rank0.log" | head -4 | sed 's/.*NCCL INFO //'
  } >> "$OUT/cluster.log"
  [ "$rc" = 0 ] || tail -n 20 "$OUT/run_${tag}_rank"*.log >> "$OUT/cluster.log"
  # The first round's rank-0 log stays (NCCL's tuning tables, channels, ICN's connection lines): why one
  # configuration is faster than another.
  [ "$round" = 1 ] && gzip -c "$OUT/run_${tag}_rank0.log" > "$OUT/log_${tag}_rank0.log.gz"
  rm -f "$OUT/run_${tag}_rank"*.log "$ids"
  tail -n 1 "$OUT/results.txt" | cut -c1-160
}

for nodes in $NODES; do
  "$bed" up --name $name --hosts "$nodes" --mtu 9000 ${RATE:+--rate "$RATE"} >/dev/null ||
    { device_fail "testbed $nodes" "icn-testbed up failed"; continue; }
  capacity 1 "$nodes"; capacity 4 "$nodes"
  # The tuner's rendezvous directory shared by the hosts' processes (private to the user, as ICN requires).
  rm -rf "$OUT/rdv"; mkdir -m 700 -p "$OUT/rdv"
  if [ "$MODE" = tuner ]; then
    fixed=()
    for a in Tree Ring; do for p in LL LL128 Simple; do fixed+=("$a-$p:ICN_TUNER=off,NCCL_ALGO=$a,NCCL_PROTO=$p"); done; done
    for r in $(seq 1 "$ROUNDS"); do
      run_group "$nodes" "$r" icn -l "$LEARN" "default:ICN_TUNER=off" "${fixed[@]}" \
        "online:ICN_TUNER=online,ICN_TUNER_CACHE=$OUT/rdv/table-n$nodes.csv"
    done
  else
    for r in $(seq 1 "$ROUNDS"); do
      for g in ${GROUPS_//,/ }; do run_group "$nodes" "$r" "$g" "$g"; done
    done
  fi
  "$bed" down --name $name >/dev/null 2>&1
done
python3 "$here/cluster_summary.py" "$OUT/results.txt" --plot "$OUT/cluster.png" > "$OUT/summary.md" || device_fail summary "cluster_summary.py failed"
cat "$OUT/summary.md"
device_checks_exit
