#!/usr/bin/env bash
# Multi-rail TCP across emulated hosts with three links each (tools/testbed/icn-testbed --rails 3; rail r on its
# own bridge and subnet). The all-to-all jobs are three ranks, one per host, exchanging 4 MiB messages with every
# byte checked (icn-diag-cluster-driver); each must end with every rank done, 0 wrong bytes.
#  1. data: every connection's log line names all three rails, and each host's rails 1 and 2 carry at least a
#     tenth of the bytes its interfaces sent (their kernel counters).
#  2. shares (two rails, ICN_SOCKET_IFNAME=eth0,eth1): rail 0 shaped to 800 Mbit/s and rail 1 to 400 Mbit/s on the
#     sender's host; icn-perf streams 4 MiB messages over both rails, then over the first alone (ICN_TCP_RAILS=1),
#     in the same run. The sender's close line must give rail 1 a share well under half (20-42%: equal pieces would
#     give it 50% and hold the pair to twice its rate), and the two rails must move >= 1.3x what one does.
#  3. failover and recovery: host 1's rail 1 goes down, and half a second later (while the first lane's pieces are
#     being resent) its rail 2; both come back 4 s later. A WARN names a lane given up on each of eth1 and eth2,
#     the job never stands still for more than 3 s (PROGRESS each second), every lane given up is back (INFO
#     "carries pieces again") and host 1's rails 1 and 2 carry bytes again in the job's last seconds; the ranks'
#     Prometheus files (ICN_PROM_DIR) count lanes given up and back on eth1 and eth2.
#  4. every link of host 1 (the handshake's included) down for 8 s: nothing to fail over to; TCP carries the job
#     over the gap (within ICN_PEER_TIMEOUT_MS, 10 s), and rank 0 moves again within 3 s of the links' return
#     (retransmissions at most ICN_TCP_RTO_MAX_MS apart; under the kernel's doubling backoff the connections
#     would wait up to 12.6 s for the next one and end at the 10 s user timeout); with ICN_PEER_TIMEOUT_MS=2000 the
#     same gap fails the job cleanly instead: every rank exits with an error within 30 s, a WARN names the peer.
#  5. the handshake's link of host 1 (rail 0: its control sockets, lane 0 and the helper lanes on it) down for 6 s
#     with ICN_PEER_TIMEOUT_MS=2000: every socket on it fails, and lane 0's copy on rail 1 carries the small
#     messages and records on (tcp_lane0.h); a WARN names lane 0 over eth0. Once eth0 is back, lane 0's copy on
#     it comes back (INFO "lane 0 over eth0 ... is back"), and then rail 1 goes down for 6 s: lane 0 goes on over
#     the copy that came back. The job ends with every rank done and 0 wrong bytes, never still for more than 3 s.
#  6. four channels (four connections per peer each way, the all-to-all over each in turn, as NCCL's channels take
#     their steps): host 1's rail 1 down for 3 s. The first connection to find the path dead tells the others
#     (tcp_paths.h): a WARN gives up a lane because another lane between the same two addresses failed, rather
#     than each connection waiting out ICN_TCP_LANE_STALL_MS in turn; every rank done, 0 wrong bytes.
#  7. a connection the job does not call (two channels, the second used only every 10th iteration and not at all
#     while DIR/hold-rare exists, as an occasional small collective's connections are), ICN_PEER_TIMEOUT_MS=2000:
#     host 1's eth1 down 5 s drops lane 0's copies over it; the rare channel is held from just before eth1's return
#     until just after eth0 goes down for 3 s. Every copy over eth1 must come back before the eth0 cut, the idle
#     connections' too (their recovery is moved by the other connections' calls, tcp_tending.h): without that, the
#     rare channel's first use after the cut finds lane 0 on eth0 alone, and waits for eth0 or fails at the peer
#     timeout. Every rank done, 0 wrong bytes, never still for more than 2 s.
#   multirail.sh DRIVER PERF PLUGIN
# Exit 77 when this machine cannot create emulated hosts.
set -euo pipefail
DRIVER=$(realpath "$1")
PERF=$(realpath "$2")
PLUGIN=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
bed="$here/../../tools/testbed/icn-testbed"
name="icnmr$$"
work=$(mktemp -d /tmp/icn-multirail.XXXXXX)
cleanup() { "$bed" down --name "$name" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "multirail: FAIL: $*"; exit 1; }

set +e
"$bed" up --name "$name" --hosts 3 --rails 3
rc=$?
set -e
[ "$rc" = 0 ] || exit "$rc"  # 77: no emulated hosts here

common=(ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,INIT ICN_LOG_DETAIL=1
        ICN_TUNER=off ICN_STRAGGLER_REPORT_S=0 ICN_HANG_REPORT_S=0)
txbytes() { "$bed" exec --name "$name" "$1" -- cat "/sys/class/net/eth$2/statistics/tx_bytes"; }

# job TAG SECONDS ENV...: starts the three ranks in the background (pids in job_pids); job_args: more driver options
job_args=()
job() {
  local tag=$1 secs=$2; shift 2
  job_pids=()
  mkdir -p "$work/$tag"
  for r in 0 1 2; do
    "$bed" exec --name "$name" "$r" -- env "${common[@]}" "$@" "$DRIVER" --rank "$r" --nranks 3 --dir "$work/$tag" \
      --bytes 4194304 --seconds "$secs" --plugin "$PLUGIN" ${job_args[@]+"${job_args[@]}"} > "$work/$tag/rank$r.log" 2>&1 &
    job_pids+=($!)
  done
}
# job_ok TAG: every rank exited 0, done, 0 wrong bytes
job_ok() {
  for r in 0 1 2; do
    wait "${job_pids[$r]}" || fail "$1: rank $r exited with an error: $(grep -v 'INFO\|PROGRESS' "$work/$1/rank$r.log" | tail -3)"
    grep -q '^DONE .*"wrong":0,"failed":0' "$work/$1/rank$r.log" || fail "$1: rank $r: $(grep DONE "$work/$1/rank$r.log")"
  done
}
# progress0 TAG: rank 0's iteration counts, one a second
progress0() { sed -n 's/^PROGRESS {"rank":0,"iters":\([0-9]*\)}/\1/p' "$work/$1/rank0.log"; }
# longest_stall TAG: the most consecutive seconds in which rank 0 finished fewer than 3 iterations
longest_stall() {
  progress0 "$1" |
    awk 'NR > 1 { if ($1 - prev < 3) { run++; if (run > best) best = run } else run = 0 } { prev = $1 } END { print best + 0 }'
}

# copies_back TAG RAIL: connection ends (all ranks) whose lane 0 copy over ethRAIL came back
copies_back() {
  grep -hcE "lane 0 over eth$2 [-<>]+ 10\.88\.$2\.[0-9]+ is back" "$work/$1"/rank*.log | awk '{ s += $1 } END { print s + 0 }'
}

# --- 1. data over three rails, three hosts ---
declare -A before
for h in 0 1 2; do for k in 0 1 2; do before[$h.$k]=$(txbytes $h $k); done; done
# ICN_TCP_CHANNELS_PER_RAIL=2: the channels NCCL gives three NICs asked for (the default leaves NCCL's count).
job data 6 ICN_TCP_CHANNELS_PER_RAIL=2
job_ok data
for r in 0 1 2; do
  n=$(grep -cE 'TCP (send|receive) connection .* on 3 rail\(s\): eth0 [-<>]+ [0-9.]+ \(lanes [0-9,]+\), eth1 [-<>]+ 10\.88\.1\.[0-9]+ \(lanes? [0-9,]+\), eth2 [-<>]+ 10\.88\.2\.[0-9]+ \(lanes? [0-9,]+\)' "$work/data/rank$r.log" || true)
  [ "$n" = 4 ] || fail "rank $r: $n of its 4 connections name all three rails: $(grep -E 'TCP (send|receive) connection' "$work/data/rank$r.log" | head -4)"
  grep -qE 'device .* spans 3 rails: NCCL_MIN_NCHANNELS=6 \(3 rails x 2 channels per rail' "$work/data/rank$r.log" ||
    fail "rank $r: no NCCL_MIN_NCHANNELS=6 for a device over three rails: $(grep -E 'spans|NCHANNELS' "$work/data/rank$r.log" | head -2)"
  iters=$(sed -n 's/^DONE {"rank":[0-9]*,"iters":\([0-9]*\).*/\1/p' "$work/data/rank$r.log")
  echo "multirail: rank $r: $iters iterations of 4 MiB to each peer, 0 wrong bytes, every connection on three rails"
done
for h in 0 1 2; do
  d=(); total=0
  for k in 0 1 2; do d[$k]=$(( $(txbytes $h $k) - before[$h.$k] )); total=$((total + d[$k])); done
  echo "multirail: host $h sent ${d[0]} bytes on eth0, ${d[1]} on eth1, ${d[2]} on eth2"
  for k in 1 2; do
    [ $((100 * d[$k] / total)) -ge 10 ] || fail "host $h: eth$k carried $((100 * d[$k] / total))% of the bytes"
  done
done

# --- 2. shares follow the rails' rates ---
"$bed" link --name "$name" 0 0 800mbit
"$bed" link --name "$name" 0 1 400mbit
perf_run() {  # perf_run TAG ENV...: host 0 sends to host 1; prints GB/s
  local tag=$1; shift
  local port=$((20000 + RANDOM % 20000))
  "$bed" exec --name "$name" 0 -- env "${common[@]}" ICN_SOCKET_IFNAME=eth0,eth1 "$@" "$PERF" --plugin "$PLUGIN" --server --port "$port" \
    --bw-only --min 4M --max 4M --window 8 --bw-bytes 512M > "$work/perf-$tag.server.log" 2>&1 &
  local srv=$!
  for _ in $(seq 100); do grep -q "waiting for the client" "$work/perf-$tag.server.log" 2>/dev/null && break; sleep 0.05; done
  "$bed" exec --name "$name" 1 -- env "${common[@]}" ICN_SOCKET_IFNAME=eth0,eth1 "$@" "$PERF" --plugin "$PLUGIN" --client "10.88.0.1:$port" \
    --bw-only --min 4M --max 4M --window 8 --bw-bytes 512M > "$work/perf-$tag.client.log" 2>&1 ||
    fail "icn-perf client ($tag): $(grep -v INFO "$work/perf-$tag.client.log" | tail -3)"
  wait "$srv" || fail "icn-perf server ($tag): $(grep -v INFO "$work/perf-$tag.server.log" | tail -3)"
  awk '$1 == 4194304 { print $2 }' "$work/perf-$tag.server.log"
}
two=$(perf_run two)
one=$(perf_run one ICN_TCP_RAILS=1)
[ -n "$two" ] && [ -n "$one" ] || fail "no bandwidth result"
line=$(grep -h 'closed: eth0 -> 10.88.0.2 carried' "$work/perf-two.server.log" | head -1)
share=$(echo "$line" | sed -n 's/.*eth1 -> 10\.88\.1\.2 carried \([0-9]*\)%.*/\1/p')
echo "multirail: rails shaped 800/400 Mbit/s: two rails $two GB/s, one rail $one GB/s; rail 1 carried $share%"
echo "multirail: $line"
[ -n "$share" ] || fail "the sender's close line names no share for eth1"
[ "$share" -ge 20 ] && [ "$share" -le 42 ] || fail "eth1 carried $share% (its rate is a third of the total)"
python3 -c "import sys; two, one = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if two >= 1.3 * one else 1)" \
  "$two" "$one" || fail "two rails moved $two GB/s, one rail $one GB/s (< 1.3x)"
"$bed" link --name "$name" 0 0 unshaped
"$bed" link --name "$name" 0 1 unshaped

# --- 3. failover: two rails of host 1 go down, one during the other's resend ---
mkdir -p "$work/prom"
job failover 16 ICN_PROM_DIR="$work/prom"
sleep 4
"$bed" link --name "$name" 1 1 down
sleep 0.5
"$bed" link --name "$name" 1 2 down
sleep 4
"$bed" link --name "$name" 1 1 up
"$bed" link --name "$name" 1 2 up
sleep 5
for k in 1 2; do late[$k]=$(txbytes 1 $k); done
sleep 2
for k in 1 2; do late[$k]=$(( $(txbytes 1 $k) - late[$k] )); done
job_ok failover
for k in 1 2; do
  grep -qhE "WARN ICN TCP connection to .*: lane [0-9]+ on eth$k -> 10\.88\.$k\.[0-9]+ failed" "$work"/failover/rank*.log ||
    fail "failover: no WARN names a lane given up on eth$k"
done
stall=$(longest_stall failover)
given=$(grep -hc "WARN ICN TCP connection to .*: lane [0-9]* on eth" "$work"/failover/rank*.log | awk '{ s += $1 } END { print s + 0 }')
resent=$(grep -h "piece(s) resent" "$work"/failover/rank*.log | sed -n 's/.* \([0-9]*\) piece(s) resent.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
back=$(grep -hc "carries pieces again" "$work"/failover/rank*.log | awk '{ s += $1 } END { print s + 0 }')
echo "multirail: failover: $given lanes given up, $resent pieces resent, $back back, 0 wrong bytes; longest stall $stall s"
echo "multirail: host 1 sent ${late[1]} bytes on eth1 and ${late[2]} on eth2 in 2 s, 5 s after the links came back"
[ "$stall" -le 3 ] || fail "failover: the job stood still for $stall s"
[ "$back" = "$given" ] || fail "failover: $given lanes given up, $back back"
for k in 1 2; do [ "${late[$k]}" -ge 10000000 ] || fail "failover: eth$k carried ${late[$k]} bytes after it came back"; done
for k in 1 2; do
  for metric in icn_tcp_rail_lanes_given_up_total icn_tcp_rail_lanes_back_total; do
    n=$(cat "$work"/prom/*.prom | sed -n "s/^$metric{.*interface=\"eth$k\"} \([0-9]*\)\$/\1/p" | awk '{ s += $1 } END { print s + 0 }')
    [ "$n" -ge 1 ] || fail "failover: the Prometheus files count $n for $metric on eth$k"
  done
done
echo "multirail: Prometheus: $(cat "$work"/prom/*.prom | grep -c '^icn_tcp_rail_') rail samples, lanes given up and back counted on eth1 and eth2"

# --- 4. every link of host 1 down: TCP carries the job over 8 s; a shorter peer timeout fails it cleanly ---
all_links() { for k in 0 1 2; do "$bed" link --name "$name" 1 "$k" "$1"; done; }
iters0() { progress0 "$1" | tail -n 1; }
job outage 18
sleep 3
all_links down
sleep 8
all_links up
back=$(date +%s%N)
at_return=$(iters0 outage)
until [ "$(iters0 outage)" != "$at_return" ]; do
  [ $(( ($(date +%s%N) - back) / 1000000 )) -lt 5000 ] || break
  sleep 0.1
done
resumed_ms=$(( ($(date +%s%N) - back) / 1000000 ))
job_ok outage
[ "$resumed_ms" -le 3000 ] || fail "outage: rank 0 moved again only $resumed_ms ms after the links returned"
echo "multirail: every link of host 1 down for 8 s: the job went on, rank 0 moving again $resumed_ms ms after the return (PROGRESS each second)"
job timeout 60 ICN_PEER_TIMEOUT_MS=2000
sleep 3
all_links down
start=$(date +%s)
failed=0
for r in 0 1 2; do wait "${job_pids[$r]}" || failed=$((failed + 1)); done
took=$(( $(date +%s) - start ))
all_links up
[ "$failed" = 3 ] || fail "timeout: $failed of 3 ranks failed with every link of host 1 down past ICN_PEER_TIMEOUT_MS"
[ "$took" -le 30 ] || fail "timeout: the ranks took $took s to fail"
grep -qh "WARN ICN TCP connection with .* failed" "$work"/timeout/rank*.log || fail "timeout: no WARN names the peer"
echo "multirail: every link of host 1 down with ICN_PEER_TIMEOUT_MS=2000: all 3 ranks failed within $took s, a WARN naming the peer"

# --- 5. the handshake's link down past the peer timeout: lane 0 goes on over its copy, which then comes back ---
job rail0 24 ICN_PEER_TIMEOUT_MS=2000
sleep 3
"$bed" link --name "$name" 1 0 down
sleep 6
"$bed" link --name "$name" 1 0 up
for _ in $(seq 80); do [ "$(copies_back rail0 0)" -ge 8 ] && break; sleep 0.1; done  # host 1's 4 connections, both ends
back=$(copies_back rail0 0)
"$bed" link --name "$name" 1 1 down
sleep 6
"$bed" link --name "$name" 1 1 up
job_ok rail0
grep -qhE "WARN ICN TCP connection with .*: lane 0 over eth0 [-<>]+ 10\.88\.0\.[0-9]+: .*; lane 0 goes on over eth1" \
  "$work"/rail0/rank*.log || fail "rail0: no WARN names lane 0 over eth0 going on over eth1"
grep -qhE "WARN ICN TCP connection with .*: lane 0 over eth1 [-<>]+ 10\.88\.1\.[0-9]+: .*; lane 0 goes on over eth0" \
  "$work"/rail0/rank*.log || fail "rail0: no WARN names lane 0 over eth1 going on over eth0 (the copy that came back)"
stall=$(longest_stall rail0)
dropped=$(grep -hc "lane 0 goes on over" "$work"/rail0/rank*.log | awk '{ s += $1 } END { print s + 0 }')
echo "multirail: host 1's eth0 down 6 s, then eth1 down 6 s (ICN_PEER_TIMEOUT_MS=2000): every rank done, 0 wrong bytes; $dropped lane 0 copies dropped (WARNs), $back of 8 ends saw their copy over eth0 come back before eth1 went down; longest stall $stall s"
[ "$back" -ge 8 ] || fail "rail0: lane 0's copies over eth0 did not come back within 8 s of its return ($back of 8 ends)"
[ "$stall" -le 3 ] || fail "rail0: the job stood still for $stall s"

# --- 6. four channels: one connection's dead path is every connection's ---
job_args=(--channels 4)
job channels 12
sleep 3
"$bed" link --name "$name" 1 1 down
sleep 3
"$bed" link --name "$name" 1 1 up
job_ok channels
job_args=()
told=$(grep -hc "a lane between the same two addresses failed" "$work"/channels/rank*.log | awk '{ s += $1 } END { print s + 0 }')
stalled=$(grep -hc "its peer acknowledged nothing for" "$work"/channels/rank*.log | awk '{ s += $1 } END { print s + 0 }')
echo "multirail: four channels, host 1's eth1 down 3 s: $stalled lanes given up on their own stall, $told on another lane's word; every rank done, 0 wrong bytes; longest stall $(longest_stall channels) s"
[ "$told" -ge 1 ] || fail "channels: no lane was given up on another lane's word (each connection waited out its own stall)"

# --- 7. recovery of connections the job does not call ---
job_args=(--channels 2 --rare 10)
job idle 26 ICN_PEER_TIMEOUT_MS=2000
sleep 3
"$bed" link --name "$name" 1 1 down
sleep 4.5
touch "$work/idle/hold-rare"  # after the copies over eth1 dropped, before eth1 returns: the rare channel stays idle
sleep 0.5
"$bed" link --name "$name" 1 1 up
# host 1's 8 connections (2 peers x 2 channels x 2 directions), both ends
for _ in $(seq 60); do [ "$(copies_back idle 1)" -ge 16 ] && break; sleep 0.1; done
sleep 1
back=$(copies_back idle 1)
"$bed" link --name "$name" 1 0 down
sleep 0.5
rm -f "$work/idle/hold-rare"
sleep 2.5
"$bed" link --name "$name" 1 0 up
echo "multirail: idle: $back of 16 ends saw lane 0's copy over eth1 back before the eth0 cut"
job_ok idle
job_args=()
dropped=$(grep -hcE "lane 0 over eth1 .*; lane 0 goes on over eth0" "$work"/idle/rank*.log | awk '{ s += $1 } END { print s + 0 }')
stall=$(longest_stall idle)
echo "multirail: a channel left idle across host 1's eth1 outage and then used during its eth0 outage: $dropped lane 0 copies over eth1 dropped; every rank done, 0 wrong bytes; longest stall $stall s"
[ "$dropped" -ge 16 ] || fail "idle: $dropped of 16 ends dropped lane 0's copy over eth1 (the outage must drop the idle channel's too)"
[ "$back" -ge 16 ] || fail "idle: lane 0's copies over eth1 came back on $back of 16 ends before the eth0 cut (the idle channel's were not moved)"
[ "$stall" -le 2 ] || fail "idle: the job stood still for $stall s"
echo "multirail: PASS"
