#!/usr/bin/env bash
# Straggler and hang diagnosis on the one-GPU cluster: N NCCL nodes share the GPU under CUDA MPS, each process in
# its own emulated host (tools/testbed/icn-testbed), every byte between ranks over ICN's TCP transport. Each rank runs
# test/device/straggler_driver.cc (all_reduce + alltoall per iteration, the host waiting for each, data checked,
# per-second progress). Cases, each its own process group:
#   healthy   HEALTHY_S seconds untouched: every 'ICN straggler:' finding is a false report
#   throttle  rank K's process stopped STOP_MS of every PERIOD_MS (SIGSTOP/SIGCONT), K rotating over INJECT_RANKS
#   delay     rank K sleeps DELAY_US before each iteration (late to every collective)
#   link      every host link shaped to RATE, rank K's (both directions) to SLOW_RATE
#   hang      rank K's process SIGSTOPped: time to the first 'ICN no network progress' WARN of another process,
#             and until icn-hang on the shared report directory names K (missing_process); then SIGCONT, and the
#             job must finish with correct data
#   cost      icn-cluster-bench, all_reduce and alltoall 8 B - 64 MiB, this plugin (diagnosis on, every default)
#             against BEFORE_PLUGIN (built from the commit before the hooks), process groups interleaved
#             COST_ROUNDS times, ICN_TUNER=off in both so both run NCCL's choices
# An injection lasts until a finding names K (polled every 0.5 s) or HOLD_S, then CLEAR_S pass before the next.
# Detection = NCCL's own timestamp of the first finding naming K (any process's log) minus the injection time.
#
#   OUT=dir test/device/straggler_proof.sh PLUGIN_SO NETTOOLS_DIR DRIVER_BIN ICN_HANG_BIN [BENCH_BIN BEFORE_PLUGIN]
# Env: NODES (4), CASES ("healthy throttle delay link hang cost"), HEALTHY_S (60), REPORT_S (2: the straggler
#      period), HANG_S (3: ICN_HANG_REPORT_S), WARM_S, HOLD_S, CLEAR_S, INJECT_RANKS (1..N-1), STOP_MS (10),
#      PERIOD_MS (20), DELAY_US (5000), RATE (10gbit), SLOW_RATE (5gbit), AR_BYTES (1M), A2A_BYTES (2M),
#      COST_ROUNDS (3), COST_ARGS, BEFORE_ENV (NAME=VALUE words for the 'before' arm only: with BEFORE_PLUGIN the
#      same plugin, e.g. "ICN_STRAGGLER_REPORT_S=0 ICN_HANG_REPORT_S=0" measures the diagnosis against itself off), PLUGIN_LABEL (printed in the summary), PROM (set: every process writes its
#      Prometheus file and heatmap, copied as each injection ends, to see the figures behind a verdict). Every rank gets ICN_TUNER_RENDEZVOUS=tcp://<host 0>:<port> and a random
#      ICN_AUTH_KEY, so a plugin that gathers the processes' summaries at the leader through the agreement service
#      can name a late rank across processes.
# Writes $OUT/summary.md (table: case, injections, named correctly, detection median/max, false reports; cost
# ratios), $OUT/results.json, $OUT/events.jsonl, $OUT/logs.tar.gz. Exit 1 when a rank failed, erred (an NCCL WARN
# other than the hang case's own), printed wrong data or did not finish (test/device/checks.sh); a diagnosis that
# names nobody is a result, not a failure. MPS, throttles, stopped processes and the hosts are always cleaned up.
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,30p' "$0"; exit 2; }
PLUGIN=$(realpath "$1"); TOOLS=$(realpath "$2"); DRIVER=$(realpath "$3"); HANG=$(realpath "$4")
BENCH=${5:+$(realpath "$5")}
BEFORE=${6:+$(realpath "$6")}
OUT=${OUT:-/tmp/icn-straggler}; mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1091  # checks.sh sits beside this script
. "$here/checks.sh"
export IP="$TOOLS/ip" TC="$TOOLS/tc"
bed="$here/../../tools/testbed/icn-testbed"
NODES=${NODES:-4}
CASES=${CASES:-"healthy throttle delay link hang cost"}
HEALTHY_S=${HEALTHY_S:-60}
REPORT_S=${REPORT_S:-2}
HANG_S=${HANG_S:-3}
WARM_S=${WARM_S:-$((3 * REPORT_S))}
HOLD_S=${HOLD_S:-$((5 * REPORT_S + 2))}
CLEAR_S=${CLEAR_S:-$((4 * REPORT_S))}
INJECT_RANKS=${INJECT_RANKS:-$(seq -s ' ' 1 $((NODES - 1)))}
STOP_MS=${STOP_MS:-10}
PERIOD_MS=${PERIOD_MS:-20}
DELAY_US=${DELAY_US:-5000}
RATE=${RATE:-10gbit}
SLOW_RATE=${SLOW_RATE:-5gbit}
AR_BYTES=${AR_BYTES:-1M}
A2A_BYTES=${A2A_BYTES:-2M}
COST_ROUNDS=${COST_ROUNDS:-3}
COST_ARGS=${COST_ARGS:-"-O all_reduce,alltoall -b 8 -e 64M -f 2 -n 20 -w 5 -R 2"}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
name=icns
W=$OUT/work
EV=$W/events.jsonl
KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
port=29600
throttler=""
rm -rf "$W"; mkdir -p "$W"

st() { python3 "$here/straggler_tool.py" "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
after() { awk -v a="$1" -v d="$2" -v b="$(now)" 'BEGIN {exit !(b >= a + d)}'; }  # status 0 once T0 + D passed

device_nccl_and_mps_env "$DRIVER"
cleanup() {
  [ -n "$throttler" ] && kill "$throttler" 2>/dev/null
  local f
  for f in "$W"/*.pid; do  # pid files exist only while their group runs
    [ -f "$f" ] || continue
    kill -CONT "$(cat "$f")" 2>/dev/null
    kill -KILL "$(cat "$f")" 2>/dev/null
  done
  "$bed" down --name "$name" >/dev/null 2>&1
  device_mps_quit
}
trap cleanup EXIT
trap 'exit 130' INT TERM
nvidia-cuda-mps-control -d || { device_fail mps "nvidia-cuda-mps-control -d failed"; device_checks_exit; }
"$bed" up --name $name --hosts "$NODES" --mtu 9000 >/dev/null || { device_fail testbed "icn-testbed up failed"; device_checks_exit; }
addr0=$("$bed" addr --name $name 0)

# The report directory must be one directory for every host (their mount namespaces share it).
for i in $(seq 0 $((NODES - 1))); do "$bed" exec --name $name "$i" -- touch "$W/visible_$i"; done
for i in $(seq 0 $((NODES - 1))); do
  [ -f "$W/visible_$i" ] || device_fail "shared dir" "host $i's file is not visible in $W"
done
rm -f "$W"/visible_*

set_rate() {  # HOST RATE: tbf on both ends of the host's link (its sends and its receives)
  "$IP" netns exec "$name-h$1" "$TC" qdisc replace dev eth0 root tbf rate "$2" burst 4mb latency 50ms &&
    "$IP" netns exec "$name-sw" "$TC" qdisc replace dev "p$1" root tbf rate "$2" burst 4mb latency 50ms
}
unset_rate() {
  "$IP" netns exec "$name-h$1" "$TC" qdisc del dev eth0 root 2>/dev/null
  "$IP" netns exec "$name-sw" "$TC" qdisc del dev "p$1" root 2>/dev/null
  return 0
}
pid_of() { cat "$W/${gtag}_rank$1.pid"; }

# start_group TAG [VAR=VALUE...]: NODES driver processes, one per host, in the background; returns once every rank
# has initialised its communicator (status 1 when one did not within 120 s).
start_group() {
  gtag=$1; shift
  gpids=()
  port=$((port + 1))
  local rank t0
  mkdir -m 700 "$W/hang_$gtag" 2>/dev/null
  for rank in $(seq 0 $((NODES - 1))); do
    echo 0 > "$W/delay_${gtag}_rank$rank"
    local prom=()
    if [ -n "${PROM:-}" ]; then
      mkdir -m 700 "$W/prom_$gtag" 2>/dev/null
      prom=(ICN_PROM_DIR="$W/prom_$gtag" ICN_HEATMAP_FILE="$W/prom_$gtag/heatmap_rank$rank.json")
    fi
    "$bed" exec --name $name "$rank" -- env NCCL_NET_PLUGIN="$PLUGIN" ICN_TRANSPORT=tcp NCCL_NVLS_ENABLE=0 \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$W/${gtag}_rank$rank.nccl" \
      NCCL_DEBUG_TIMESTAMP_LEVELS=ALL NCCL_DEBUG_TIMESTAMP_FORMAT='%s.%3f_' \
      ICN_STRAGGLER_REPORT_S="$REPORT_S" ICN_HANG_REPORT_S="$HANG_S" ICN_HANG_REPORT_DIR="$W/hang_$gtag" \
      ICN_TUNER_RENDEZVOUS="tcp://$addr0:$port" ICN_AUTH_KEY="$KEY" "${prom[@]}" "$@" \
      timeout "$RUN_TIMEOUT" "$DRIVER" -r "$rank" -N "$NODES" -i "$W/ids_$gtag" -T 86400 -s "$AR_BYTES" \
      -a "$A2A_BYTES" -p "$W/${gtag}_rank$rank.pid" -d "$W/delay_${gtag}_rank$rank" -x "$W/stop_$gtag" \
      > "$W/${gtag}_rank$rank.log" 2>&1 &
    gpids+=($!)
  done
  t0=$(now)
  for rank in $(seq 0 $((NODES - 1))); do
    until grep -q '^INIT ' "$W/${gtag}_rank$rank.log" 2>/dev/null && [ -s "$W/${gtag}_rank$rank.pid" ]; do
      if after "$t0" 120 || ! kill -0 "${gpids[$rank]}" 2>/dev/null; then
        device_fail "$gtag rank $rank" "did not initialise (see its log)"
        tail -n 5 "$W/${gtag}_rank$rank.log" "$W/${gtag}_rank$rank.nccl" >&2
        abort_group
        return 1
      fi
      sleep 0.2
    done
  done
  echo "== $gtag: $NODES ranks up after $(since "$t0") s"
}

abort_group() {  # ends a group that did not come up
  local f p
  for f in "$W/${gtag}"_rank*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; rm -f "$f"; done
  for p in "${gpids[@]}"; do kill "$p" 2>/dev/null; wait "$p"; done
}

# finish_group [EXTRA_BENIGN_RE]: asks the ranks to stop, waits, checks every rank (exit 0, no error line, the
# plugin used, NODES nodes, DONE with 0 wrong elements).
finish_group() {
  local benign=$DEVICE_BENIGN_RE rcs=() i st log
  [ -n "${1:-}" ] && benign="$benign|$1"
  touch "$W/stop_$gtag"
  for i in "${!gpids[@]}"; do wait "${gpids[$i]}"; st=$?; rcs+=("$st"); done
  for i in "${!gpids[@]}"; do
    log="$W/${gtag}_rank$i.all"
    cat "$W/${gtag}_rank$i.log" "$W/${gtag}_rank$i.nccl" > "$log" 2>/dev/null
    DEVICE_BENIGN_RE=$benign check_run "$gtag rank $i" "${rcs[$i]}" "$log" --expect "Using network ICN" \
      --expect "nNodes $NODES localRanks 1" --expect '^DONE .*"wrong":0'
    rm -f "$log" "$W/${gtag}_rank$i.pid"
  done
  grep -h '^DONE' "$W/${gtag}_rank"*.log | sed "s/^/  /"
}

case_healthy() {
  start_group healthy || return
  local t0 t1
  t0=$(now); sleep "$HEALTHY_S"; t1=$(now)
  st event "$EV" case=healthy tag=healthy kind=span t0="$t0" t1="$t1"
  finish_group
}

inject() {  # CASE RANK
  case $1 in
    # python3 itself in the background (not through st, whose subshell would take the TERM and leave it running)
    throttle) python3 "$here/straggler_tool.py" throttle "$(pid_of "$2")" "$STOP_MS" "$PERIOD_MS" & throttler=$! ;;
    delay) echo "$DELAY_US" > "$W/delay_${gtag}_rank$2" ;;
    link) set_rate "$2" "$SLOW_RATE" ;;
  esac
}
release() {  # CASE RANK
  if [ -n "${PROM:-}" ]; then  # what every process measured, as the injection ends
    mkdir -p "$W/snap_${gtag}_rank$2" && cp "$W/prom_$gtag"/* "$W/snap_${gtag}_rank$2/" 2>/dev/null
  fi
  case $1 in
    throttle) kill "$throttler"; wait "$throttler"; throttler="" ;;
    delay) echo 0 > "$W/delay_${gtag}_rank$2" ;;
    link) set_rate "$2" "$RATE" ;;
  esac
}

case_inject() {  # throttle | delay | link
  local c=$1 k t0 t1 hit i link=()
  if [ "$c" = link ]; then
    link=(--link)
    for i in $(seq 0 $((NODES - 1))); do set_rate "$i" "$RATE" || device_fail link "tc on host $i failed"; done
  fi
  if start_group "$c"; then
    sleep "$WARM_S"
    for k in $INJECT_RANKS; do
      t0=$(now)
      inject "$c" "$k"
      hit=""
      until after "$t0" "$HOLD_S"; do
        hit=$(st named "$W" "$c" "$t0" "$k" "${link[@]}") && break
        hit=""
        sleep 0.5
      done
      release "$c" "$k"
      t1=$(now)
      st event "$EV" case="$c" tag="$c" kind=inject rank="$k" t0="$t0" t1="$t1"
      echo "  $c rank $k: ${hit:-not named within $HOLD_S s}"
      sleep "$CLEAR_S"
    done
    finish_group
  fi
  if [ "$c" = link ]; then for i in $(seq 0 $((NODES - 1))); do unset_rate "$i"; done; fi
}

case_hang() {
  start_group hang || return
  local k pid t0 t1 warn named summary kind hosts dir="$W/hang_hang"
  sleep "$WARM_S"
  for k in $INJECT_RANKS; do
    rm -f "$dir"/icn-hang-*.json
    pid=$(pid_of "$k")
    kill -STOP "$pid"; t0=$(now)
    warn=""; named=""; summary=""; kind=""
    until after "$t0" $((HANG_S + 8)); do
      [ -z "$warn" ] && warn=$(st hangwarn "$W" hang "$t0" "$k" | cut -d' ' -f1)
      if [ -z "$named" ] && after "$t0" 1; then
        "$HANG" --json "$dir" > "$W/icn_hang_rank$k.json" 2>/dev/null
        summary=$(st hangnamed "$W/icn_hang_rank$k.json" "$k") && named=$(since "$t0")
      fi
      [ -n "$warn" ] && [ -n "$named" ] && break
      sleep 0.5
    done
    "$HANG" "$dir" > "$W/icn_hang_rank$k.txt" 2>&1
    [ -n "$named" ] || kind=$(python3 -c 'import json,sys; print(",".join(a["kind"] for a in json.load(open(sys.argv[1]))))' \
      "$W/icn_hang_rank$k.json" 2>/dev/null)
    hosts=$(find "$dir" -name 'icn-hang-*.json' ! -name 'icn-hang-merged-*' | sed 's/.*icn-hang-\(.*\)-[0-9]*\.json/\1/' | sort -u | wc -l)
    kill -CONT "$pid"; t1=$(now)
    st event "$EV" case=hang tag=hang kind=inject rank="$k" t0="$t0" t1="$t1" warn_s="$warn" named_s="$named" \
      summary="$summary" other_kind="$kind" report_hosts="$hosts"
    echo "  hang rank $k: WARN after ${warn:-(none)} s, icn-hang named it after ${named:-(never)} s; reports from $hosts hosts"
    sed 's/^/    /' "$W/icn_hang_rank$k.txt" | head -8
    sleep $((HANG_S + 2))  # the job resumes; every process writes its 'resumed' report
  done
  finish_group 'NCCL WARN ICN (no network progress|hang on comm)'
}

# run_cost ROUND LABEL PLUGIN: one icn-cluster-bench process group.
run_cost() {
  local round=$1 label=$2 plugin=$3 rank pids=() rcs=() st i extra armenv=()
  port=$((port + 1))
  # shellcheck disable=SC2206  # BEFORE_ENV is a list of NAME=VALUE words
  [ "$label" = before ] && armenv=($BEFORE_ENV)
  mkdir -m 700 "$W/hang_cost" 2>/dev/null
  for rank in $(seq 0 $((NODES - 1))); do
    # shellcheck disable=SC2086
    "$bed" exec --name $name "$rank" -- env NCCL_NET_PLUGIN="$plugin" ICN_TRANSPORT=tcp ICN_TUNER=off \
      NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT ICN_HANG_REPORT_DIR="$W/hang_cost" \
      ICN_TUNER_RENDEZVOUS="tcp://$addr0:$port" ICN_AUTH_KEY="$KEY" "${armenv[@]}" \
      timeout 300 "$BENCH" -r "$rank" -N "$NODES" -i "$W/ids_cost_${round}_$label" -t "$label" $COST_ARGS default \
      > "$W/cost_${round}_${label}_rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}"; st=$?; rcs+=("$st"); done
  for i in "${!pids[@]}"; do
    extra=()
    [ "$i" = 0 ] && extra=(--expect '^CLUSTER .*"us"')
    check_run "cost $round $label rank $i" "${rcs[$i]}" "$W/cost_${round}_${label}_rank$i.log" \
      --expect "Using network ICN" --expect "nNodes $NODES localRanks 1" "${extra[@]}"
  done
  grep -h '^CLUSTER' "$W/cost_${round}_${label}_rank0.log" >> "$W/cost_results.txt"
  echo "  cost round $round $label: $(grep -c '"us"' "$W/cost_${round}_${label}_rank0.log") timed blocks"
}

case_cost() {
  if [ -z "$BENCH" ] || [ -z "$BEFORE" ]; then
    echo "== cost: skipped (needs BENCH_BIN and BEFORE_PLUGIN)"
    return
  fi
  echo "== cost: $COST_ROUNDS rounds of on / before"
  local r
  for r in $(seq 1 "$COST_ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then run_cost "$r" on "$PLUGIN"; run_cost "$r" before "$BEFORE"
    else run_cost "$r" before "$BEFORE"; run_cost "$r" on "$PLUGIN"; fi
  done
}

start=$(now)
for c in $CASES; do
  case $c in
    healthy) case_healthy ;;
    throttle|delay|link) case_inject "$c" ;;
    hang) case_hang ;;
    cost) case_cost ;;
    *) device_fail "$c" "unknown case" ;;
  esac
done
"$bed" down --name "$name" >/dev/null 2>&1

{
  echo "# Straggler and hang diagnosis, $NODES nodes on one GPU"
  echo
  [ -n "${PLUGIN_LABEL:-}" ] && echo "Plugin: $PLUGIN_LABEL" && echo
  echo "NODES=$NODES REPORT_S=$REPORT_S HANG_S=$HANG_S HEALTHY_S=$HEALTHY_S WARM_S=$WARM_S HOLD_S=$HOLD_S" \
    "CLEAR_S=$CLEAR_S INJECT_RANKS='$INJECT_RANKS' throttle ${STOP_MS}/${PERIOD_MS} ms, delay ${DELAY_US} us," \
    "link $SLOW_RATE of $RATE, all_reduce $AR_BYTES + alltoall $A2A_BYTES per iteration; $(since "$start") s in all"
  echo
  st summary "$W" || device_fail summary "straggler_tool.py summary failed"
} > "$OUT/summary.md"
cp "$EV" "$OUT/events.jsonl" 2>/dev/null
cp "$W/results.json" "$OUT/results.json" 2>/dev/null
tar -C "$W" -czf "$OUT/logs.tar.gz" . && rm -rf "$W"
cat "$OUT/summary.md"
device_checks_exit
