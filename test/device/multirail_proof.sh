#!/usr/bin/env bash
# Two links per host on the one-GPU cluster: N NCCL nodes share the GPU under CUDA MPS, each process in its own
# emulated host with two links (tools/testbed/icn-testbed --rails 2: eth0 and eth1 on two bridges and subnets, each
# shaped to RATE both ways, like two NICs on two fabrics). Two parts, per node count:
#   bandwidth  icn-cluster-bench (every collective's data checked before it is timed), the BW_GROUPS: ICN's TCP
#              transport over both links (icn; icn-nocopy: lane 0 on eth0 alone, ICN_TCP_LANE0_COPY=0), ICN over
#              eth0 alone, NCCL's Socket transport over both interfaces and over eth0 alone (and icn-ch4: ICN over
#              both links with NCCL_MIN_NCHANNELS=4 set by the job; icn-ask: ICN asks NCCL for 2 channels per rail,
#              ICN_TCP_CHANNELS_PER_RAIL=2); groups interleaved
#              ROUNDS times, ICN_TUNER=off so every group runs NCCL's own choices.
#   flaps      icn-straggler-driver (all_reduce AR_BYTES + alltoall A2A_BYTES per iteration, data checked every 50,
#              PROGRESS every 100 ms) over both links, ICN and then Socket, while one host's link goes down for each
#              of DOWNS seconds (SECONDS or SECONDS@LINK: eth1 unless named; eth0 carries the handshake and ICN's
#              lane 0), GAP_S apart (the host rotating over 1..N-1). Per event: the longest time without
#              an iteration, the rate while the link is down and 2-4 s after it is back, against the rate before
#              the first event. An ICN job must finish with every element right; what Socket does is recorded (a
#              job that stops moving is ended STUCK_S after the last event and counted as not finished).
#
# A second build of the plugin in PLUGIN_B runs as group icn-b (as icn), to compare two builds in one run; a group
# icn+NAME=VALUE[+NAME=VALUE...] runs icn with those settings added (a table of its own against icn).
#   OUT=dir [PLUGIN_B=other.so] test/device/multirail_proof.sh PLUGIN_SO NETTOOLS_DIR BENCH_BIN DRIVER_BIN
# Env: NODES ("2 4"), PARTS ("bandwidth flaps"), RATE (5gbit per link), ROUNDS (2), BW_ARGS (icn-cluster-bench
#      options), BW_GROUPS ("icn icn-nocopy icn-1 socket socket-1"), AR_BYTES (8M), A2A_BYTES (8M),
#      DOWNS ("1 3 0.5 10 2 4@0"), GAP_S (6), WARM_S (5), STUCK_S (40), FLAP_GROUPS ("icn socket"),
#      NCCL_LIB_DIR (a folder holding another NCCL's libnccl.so.2, loaded in place of the machine's; the summary
#      names the library's NCCL version, and a rank 0 that printed no such version line fails the checks).
# Writes $OUT/summary.md, $OUT/results.txt (CLUSTER lines), $OUT/flaps.jsonl (events and progress), $OUT/logs.tar.gz.
# Exit 1 when an ICN rank failed, erred, did not use ICN over two rails, or counted wrong elements, or a Socket
# bandwidth group failed (test/device/checks.sh). MPS and the hosts are always removed.
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,22p' "$0"; exit 2; }
PLUGIN=$(realpath "$1"); TOOLS=$(realpath "$2"); BENCH=$(realpath "$3"); DRIVER=$(realpath "$4")
OUT=${OUT:-/tmp/icn-multirail}; mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1091  # checks.sh sits beside this script
. "$here/checks.sh"
export IP="$TOOLS/ip" TC="$TOOLS/tc"
bed="$here/../../tools/testbed/icn-testbed"
NODES=${NODES:-"2 4"}
PARTS=${PARTS:-"bandwidth flaps"}
RATE=${RATE:-5gbit}
ROUNDS=${ROUNDS:-2}
BW_ARGS=${BW_ARGS:-"-O all_reduce,alltoall -b 16M -e 64M -f 4 -n 10 -w 3 -R 2"}
AR_BYTES=${AR_BYTES:-8M}
A2A_BYTES=${A2A_BYTES:-8M}
DOWNS=${DOWNS:-"1 3 0.5 10 2 4@0"}
BW_GROUPS=${BW_GROUPS:-"icn icn-nocopy icn-1 socket socket-1"}
GAP_S=${GAP_S:-6}
WARM_S=${WARM_S:-5}
STUCK_S=${STUCK_S:-40}
FLAP_GROUPS=${FLAP_GROUPS:-"icn socket"}
name=icnr
W=$OUT/work
rm -rf "$W"; mkdir -p "$W"
: > "$OUT/results.txt"; : > "$OUT/flaps.jsonl"

if [ -n "${NCCL_LIB_DIR:-}" ]; then
  NCCL_LIB_DIR=$(realpath "$NCCL_LIB_DIR"); export LD_LIBRARY_PATH="$NCCL_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
device_nccl_and_mps_env "$DRIVER"
# The version the loaded NCCL prints (NCCL_DEBUG=INFO), read once from the library itself; rank 0 must print it.
nccl_lib=$(ldd "$DRIVER" | awk '/libnccl.so.2 =>/ {print $3}')
nccl_version=$([ -n "$nccl_lib" ] && grep -aoE 'NCCL version [0-9]+\.[0-9]+\.[0-9]+' "$nccl_lib" | head -1 | awk '{print $3}')
version_expect=()
[ -n "$nccl_version" ] && version_expect=(--expect "NCCL version $nccl_version")
echo "NCCL: ${nccl_version:-unknown} ($nccl_lib)"
cleanup() {
  # The ranks' command lines start with the driver's path; this script's has it as an argument and must live on.
  pkill -KILL -f "^$DRIVER " 2>/dev/null
  "$bed" down --name $name >/dev/null 2>&1
  device_mps_quit
  (cd "$W" && tar czf "$OUT/logs.tar.gz" . 2>/dev/null)
}
trap cleanup EXIT
trap 'exit 130' INT TERM
nvidia-cuda-mps-control -d || { device_fail mps "nvidia-cuda-mps-control -d failed"; device_checks_exit; }
now() { date +%s.%N; }

# GROUP -> its environment (ICN's transport over both links or eth0; NCCL's Socket over both interfaces or eth0).
group_env() {
  case $1 in
    icn) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off ICN_LOG_DETAIL=1" ;;
    icn-b) echo "NCCL_NET_PLUGIN=$(realpath "${PLUGIN_B:?icn-b needs PLUGIN_B}") ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off ICN_LOG_DETAIL=1" ;;
    icn-ask) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off ICN_TCP_CHANNELS_PER_RAIL=2" ;;
    icn-ch4) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off NCCL_MIN_NCHANNELS=4" ;;
    icn-nocopy) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth ICN_TUNER=off ICN_TCP_LANE0_COPY=0" ;;
    icn-1) echo "NCCL_NET_PLUGIN=$PLUGIN ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth0 ICN_TUNER=off" ;;
    socket) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_IFNAME=eth" ;;
    socket-1) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_IFNAME=eth0" ;;
    icn+*) echo "$(group_env icn) $(echo "${1#icn+}" | tr '+' ' ')" ;;  # icn+NAME=VALUE[+NAME=VALUE]: a variant
  esac
}
# The line that proves the transport and its links: ICN names both rails on each connection.
group_expect() {
  case $1 in
    icn|icn-b|icn-ask|icn-ch4|icn-nocopy|icn+*) echo 'on 2 rail\(s\): eth0 .* eth1' ;;
    icn-1) echo 'Using network ICN' ;;
    socket) echo 'NET/Socket : Using \[0\]eth0:.* \[1\]eth1:' ;;
    socket-1) echo 'Using network Socket' ;;
  esac
}
# NCCL's rings with one GPU per node (rank 0 prints them): two NICs get 4 channels, ICN's one device over two rails
# 2, or 4 when ICN (ICN_TCP_CHANNELS_PER_RAIL=2) or the job (NCCL_MIN_NCHANNELS=4) asks for them.
group_channels() {
  case $1 in
    icn|icn-nocopy) echo 'Channel 01/02 :' ;;
    icn-ask|icn-ch4|socket) echo 'Channel 03/04 :' ;;
  esac
}
is_icn() { [[ $1 == icn* ]]; }

run_bench() {  # NODES ROUND GROUP
  local nodes=$1 round=$2 group=$3 tag pids=() rcs=() rank p st envs
  tag="bw_n${nodes}_r${round}_$group"
  envs=$(group_env "$group")
  for rank in $(seq 0 $((nodes - 1))); do
    # shellcheck disable=SC2086  # envs is a list of NAME=VALUE words
    "$bed" exec --name $name "$rank" -- env $envs NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      ICN_LOG_DETAIL=1 timeout 150 "$BENCH" -r "$rank" -N "$nodes" -i "$W/ids_$tag" -t "$group@$RATE" $BW_ARGS \
      "$group" > "$W/${tag}_rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; st=$?; rcs+=("$st"); done
  for rank in $(seq 0 $((nodes - 1))); do
    local extra=()
    [ "$rank" = 0 ] && extra=(--expect '^CLUSTER .*"us"')
    [ "$rank" = 0 ] && [ -n "$(group_channels "$group")" ] && extra+=(--expect "$(group_channels "$group")")
    [ "$rank" = 0 ] && extra+=("${version_expect[@]}")
    check_run "$tag rank $rank" "${rcs[$rank]}" "$W/${tag}_rank$rank.log" --expect "$(group_expect "$group")" \
      --expect "nNodes $nodes localRanks 1" "${extra[@]}"
  done
  grep -h '^CLUSTER' "$W/${tag}_rank0.log" | sed "s|^CLUSTER {|CLUSTER {\"round_group\": $round, |" >> "$OUT/results.txt"
  echo "== $tag: rc ${rcs[*]}; $(grep -c '^CLUSTER' "$W/${tag}_rank0.log") rows"
  # Keep rank 0's log of the first round (connections, rails, channels); the rest goes.
  if [ "$round" = 1 ]; then rm -f "$W/${tag}_rank"[1-9]*.log; else rm -f "$W/${tag}_rank"*.log; fi
}

ev() { echo "$1" >> "$OUT/flaps.jsonl"; }

run_flaps() {  # NODES GROUP
  local nodes=$1 group=$2 tag pids=() rcs=() rank p st envs i=0 host d t0 finished spec link
  tag="flaps_n${nodes}_$group"
  envs=$(group_env "$group")
  for rank in $(seq 0 $((nodes - 1))); do
    # shellcheck disable=SC2086
    "$bed" exec --name $name "$rank" -- env $envs NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      NCCL_DEBUG_TIMESTAMP_LEVELS=WARN "$DRIVER" -r "$rank" -N "$nodes" -i "$W/ids_$tag" -T 86400 -P 100 \
      -s "$AR_BYTES" -a "$A2A_BYTES" -x "$W/stop_$tag" > "$W/${tag}_rank$rank.log" 2>&1 &
    pids+=($!)
  done
  t0=$(now)
  until grep -q '^PROGRESS' "$W/${tag}_rank0.log" 2>/dev/null; do
    sleep 0.2
    if awk -v a="$t0" -v b="$(now)" 'BEGIN { exit !(b > a + 120) }' || ! kill -0 "${pids[0]}" 2>/dev/null; then break; fi
  done
  sleep "$WARM_S"
  ev "{\"kind\":\"start\",\"tag\":\"$tag\",\"nodes\":$nodes,\"group\":\"$group\",\"t\":$(now)}"
  for spec in $DOWNS; do
    d=${spec%@*}; link=1
    [ "$spec" = "$d" ] || link=${spec#*@}
    host=$((1 + i % (nodes - 1))); i=$((i + 1))
    "$bed" link --name $name "$host" "$link" down
    ev "{\"kind\":\"down\",\"tag\":\"$tag\",\"host\":$host,\"link\":$link,\"t\":$(now),\"planned_s\":$d}"
    sleep "$d"
    "$bed" link --name $name "$host" "$link" up
    ev "{\"kind\":\"up\",\"tag\":\"$tag\",\"host\":$host,\"t\":$(now)}"
    sleep "$GAP_S"
  done
  touch "$W/stop_$tag"
  # A job that still moves ends within seconds of the stop file; one that does not is ended after STUCK_S.
  for rank in $(seq 0 $((nodes - 1))); do
    p=${pids[$rank]}
    for _ in $(seq 1 $((STUCK_S * 5))); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$p" 2>/dev/null && pkill -KILL -f "$W/ids_$tag" 2>/dev/null
    wait "$p"; st=$?; rcs+=("$st")
  done
  finished=1
  for rank in $(seq 0 $((nodes - 1))); do
    grep -q '^DONE .*"wrong":0' "$W/${tag}_rank$rank.log" || finished=0
  done
  ev "{\"kind\":\"end\",\"tag\":\"$tag\",\"t\":$(now),\"finished\":$finished,\"rcs\":\"${rcs[*]}\"}"
  grep -h '^PROGRESS {"t":[0-9.]*,"rank":0,' "$W/${tag}_rank0.log" |
    sed "s|^PROGRESS {|{\"kind\":\"progress\",\"tag\":\"$tag\",|" >> "$OUT/flaps.jsonl"
  if is_icn "$group"; then
    for rank in $(seq 0 $((nodes - 1))); do
      local vexp=()
      [ "$rank" = 0 ] && vexp=("${version_expect[@]}")
      # ICN's failover WARNs (a lane given up, a copy of lane 0 dropped, each naming its rail) are the expected
      # notices of this case.
      DEVICE_BENIGN_RE="$DEVICE_BENIGN_RE|NCCL WARN ICN TCP connection to .*: lane [0-9]+ on eth[0-9]+( -> [0-9.]+)? failed|NCCL WARN ICN TCP connection with .*: lane 0 over eth[0-9]+.*; lane 0 goes on over eth[0-9]+" check_run "$tag rank $rank" \
        "${rcs[$rank]}" "$W/${tag}_rank$rank.log" --expect "$(group_expect "$group")" --expect '^DONE .*"wrong":0' \
        "${vexp[@]}"
    done
  fi
  echo "== $tag: finished=$finished rc ${rcs[*]}; $(grep -h '^DONE' "$W/${tag}_rank0.log")"
  grep -h 'WARN' "$W/${tag}_rank"*.log | sed 's/^[^ ]* //' | cut -c1-200 | sort | uniq -c | sort -rn | head -5
}

for nodes in $NODES; do
  "$bed" up --name $name --hosts "$nodes" --rails 2 --mtu 9000 >/dev/null ||
    { device_fail "testbed $nodes" "icn-testbed up failed"; continue; }
  for h in $(seq 0 $((nodes - 1))); do for r in 0 1; do "$bed" link --name $name "$h" "$r" "$RATE"; done; done
  for part in $PARTS; do
    case $part in
      bandwidth)
        for round in $(seq 1 "$ROUNDS"); do
          for g in $BW_GROUPS; do run_bench "$nodes" "$round" "$g"; done
        done ;;
      flaps) for g in $FLAP_GROUPS; do run_flaps "$nodes" "$g"; done ;;
    esac
    { echo "NCCL ${nccl_version:-unknown}, $nodes nodes"; echo
      python3 "$here/multirail_summary.py" "$OUT/results.txt" "$OUT/flaps.jsonl" "$RATE"; } > "$OUT/summary.md"
  done
  "$bed" down --name $name >/dev/null 2>&1
done
cat "$OUT/summary.md"
device_checks_exit
