#!/usr/bin/env bash
# Cross-host proof on a GPU machine: two emulated hosts (tools/testbed/icn-testbed: network + UTS + mount
# namespaces, a veth link through a bridge, NCCL_HOSTID per host), one process per rank through PyTorch
# (test/device/xhost_bench.py), ICN against NCCL's Socket transport at its default and tuned settings,
# configurations interleaved round by round; iperf3 gives the link's raw TCP capacity.
# With one GPU both ranks share it (two NCCL nodes: bandwidth is meaningful, latency is not).
#   OUT=dir test/device/xhost_proof.sh PLUGIN_SO NETTOOLS_DIR [ROUNDS] [CONFIGS] [BENCH ARGS...]
# CONFIGS: comma list of icn-tcp, icn-tcp-s8, icn-ucx, icn-default, socket-default, socket-2x2, socket-4x4, socket-8x2;
# a config may add variables after '+': icn-tcp+NCCL_P2P_NET_CHUNKSIZE=524288+ICN_TCP_STREAMS=1
# Exit status 1 when a rank failed or erred, did not use the transport asked for, printed no results, or the
# summary counted wrong elements (test/device/checks.sh, xhost_summary.py); every reason is printed as a FAIL line.
set -uo pipefail
PLUGIN=$(realpath "$1"); TOOLS=$(realpath "$2"); ROUNDS=${3:-3}
CONFIGS=${4:-icn-default,icn-ucx,socket-default,socket-2x2,socket-4x4}
shift 4 2>/dev/null || shift $#
BENCH_ARGS=("$@")
OUT=${OUT:-/tmp/icn-xhost}; mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/checks.sh"
export IP="$TOOLS/ip" TC="$TOOLS/tc"
bed="$here/../../tools/testbed/icn-testbed"
PY=${PY:-/opt/torch/.venv/bin/python}
NGPU=$(nvidia-smi -L | wc -l)
name=icnx
trap '"$bed" down --name $name' EXIT
"$bed" up --name $name --hosts 2 --mtu 9000 ${SHAPE:-} || { device_fail testbed "icn-testbed up failed"; exit 1; }

# iperf3 3.x before 3.16 runs all of its streams in one thread: N processes with one stream each measure
# what N threads can push through the link.
echo "== raw TCP capacity (parallel iperf3 processes, 10.88.0.2 -> 10.88.0.1)" | tee -a "$OUT/xhost.log"
for n in 1 4 8; do
  for i in $(seq 1 $n); do "$bed" exec --name $name 0 -- "$TOOLS/iperf3" -s -1 -p $((5200 + i)) >/dev/null 2>&1 & done
  sleep 1
  for i in $(seq 1 $n); do
    "$bed" exec --name $name 1 -- "$TOOLS/iperf3" -c 10.88.0.1 -p $((5200 + i)) -t 5 -J > "$OUT/iperf_$i.json" 2>/dev/null &
  done
  wait
  python3 - "$n" "$OUT"/iperf_*.json <<'PY' | tee -a "$OUT/results.txt"
import json, sys
n, files = int(sys.argv[1]), sys.argv[2:]
gbs = sum(json.load(open(f))["end"]["sum_received"]["bits_per_second"] / 8e9 for f in files)
print("XHOST " + json.dumps({"label": "iperf3", "op": "tcp", "streams": n, "gbs": gbs}))
PY
  [ "${PIPESTATUS[0]}" = 0 ] || device_fail "iperf3 $n" "no capacity measured (iperf3 output missing or broken)"
  rm -f "$OUT"/iperf_*.json
done

cfg_env() {
  local base=${1%%+*} extra=""
  [ "$base" = "$1" ] || extra=" ${1#*+}"
  echo "$(base_env "$base")${extra//+/ }"
}
base_env() {
  case "$1" in
    icn-default) echo "NCCL_NET_PLUGIN=$PLUGIN" ;;
    icn-tcp) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_TUNER=off" ;;
    icn-tcp-s8) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_TUNER=off ICN_TCP_STREAMS=8" ;;
    icn-ucx) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=ucx UCX_TLS=tcp ICN_TUNER=off" ;;
    socket-default) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket" ;;
    socket-2x2) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2" ;;
    socket-4x4) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4" ;;
    socket-8x2) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=8 NCCL_NSOCKS_PERTHREAD=2" ;;
    *) echo "unknown config $1" >&2; return 1 ;;
  esac
}

port=29500
for r in $(seq 1 "$ROUNDS"); do
  for cfg in ${CONFIGS//,/ }; do
    port=$((port + 1))
    envs=$(cfg_env "$cfg"); [ -n "${envs%% *}" ] || exit 2
    tag=${cfg//[^A-Za-z0-9_.=+-]/_}  # a file name for the config (its extras may hold paths)
    pids=()
    for rank in 0 1; do
      gpu=$(( NGPU > 1 ? rank : 0 ))
      # shellcheck disable=SC2086
      "$bed" exec --name $name $rank -- env $envs RANK=$rank WORLD_SIZE=2 MASTER_ADDR=10.88.0.1 MASTER_PORT=$port \
        LOCAL_GPU=$gpu NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET PYTHONUNBUFFERED=1 \
        timeout 300 "$PY" "$here/xhost_bench.py" --label "$cfg" "${BENCH_ARGS[@]}" > "$OUT/run_r${r}_${tag}_rank$rank.log" 2>&1 &
      pids+=($!)
    done
    rc=0; rcs=()
    for p in "${pids[@]}"; do wait "$p"; r_rc=$?; rcs+=("$r_rc"); [ "$r_rc" = 0 ] || rc=$r_rc; done
    used="Using network ICN"
    [[ $cfg == socket* ]] && used="Using network Socket"
    # Only rank 0 prints results (other ranks print a record only when their data check fails).
    check_run "round $r $cfg rank 0" "${rcs[0]}" "$OUT/run_r${r}_${tag}_rank0.log" --expect "$used" --expect "^XHOST "
    check_run "round $r $cfg rank 1" "${rcs[1]}" "$OUT/run_r${r}_${tag}_rank1.log" --expect "$used"
    grep -h "^XHOST" "$OUT/run_r${r}_${tag}_rank"*.log | sed "s|\"label\": \"$cfg\"|\"label\": \"$cfg\", \"round\": $r|" >> "$OUT/results.txt"
    {
      echo "== round $r $cfg rc=$rc"
      grep -hE "NET/Plugin|Using network|nNodes|ICN transport|ICN .*connection .*ready|via NET|ICN UCX .*device|ICN tcp|Error|WARN|Traceback" \
        "$OUT/run_r${r}_${tag}_rank"*.log | sort | uniq -c | sort -rn | head -25
      grep -h "^XHOST" "$OUT/run_r${r}_${tag}_rank0.log" | cut -c1-200
    } >> "$OUT/xhost.log"
    tail -n 3 "$OUT/xhost.log"
    # Every connection's close line (paths taken, waits): why one configuration moves more than another.
    { echo "== round $r $cfg"; grep -h "connection .* closed:" "$OUT/run_r${r}_${tag}_rank"*.log | sed 's/.*NCCL INFO //'; } >> "$OUT/close.log"
    [ "$rc" = 0 ] || tail -n 30 "$OUT/run_r${r}_${tag}_rank"*.log >> "$OUT/xhost.log"
    rm -f "$OUT/run_r${r}_${tag}_rank"*.log
  done
done
python3 "$here/xhost_summary.py" "$OUT/results.txt" > "$OUT/summary.md" || device_fail summary "xhost_summary.py failed (reason above)"
cat "$OUT/summary.md"
device_checks_exit
