#!/usr/bin/env bash
# Multi-rail TCP across emulated hosts with two links each (tools/testbed/icn-testbed --rails 2; rail r on its own
# bridge and subnet). Two cases:
#  1. data: three ranks, one per host, an all-to-all of 4 MiB messages for a few seconds with every byte checked
#     (icn-diag-cluster-driver); every connection's log line must name both rails, and each host's second
#     interface must carry at least a fifth of the bytes its interfaces sent (its kernel counters).
#  2. shares: rail 0 shaped to 800 Mbit/s and rail 1 to 400 Mbit/s on the sender's host; icn-perf streams 4 MiB
#     messages over both rails, then over the first alone (ICN_TCP_RAILS=1), in the same run. The sender's close
#     line must give rail 1 a share well under half (20-42%: equal pieces would give it 50% and hold the pair to
#     twice its rate), and the two rails must move >= 1.3x what one does.
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
"$bed" up --name "$name" --hosts 3 --rails 2
rc=$?
set -e
[ "$rc" = 0 ] || exit "$rc"  # 77: no emulated hosts here

common=(ICN_TRANSPORT=tcp ICN_SOCKET_IFNAME=eth NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,INIT ICN_LOG_DETAIL=1
        ICN_TUNER=off ICN_STRAGGLER_REPORT_S=0 ICN_HANG_REPORT_S=0)
txbytes() { "$bed" exec --name "$name" "$1" -- cat "/sys/class/net/eth$2/statistics/tx_bytes"; }

# --- 1. data over both rails, three hosts ---
declare -A before0 before1
for h in 0 1 2; do before0[$h]=$(txbytes $h 0); before1[$h]=$(txbytes $h 1); done
pids=()
for r in 0 1 2; do
  "$bed" exec --name "$name" "$r" -- env "${common[@]}" "$DRIVER" --rank "$r" --nranks 3 --dir "$work" \
    --bytes 4194304 --seconds 6 --plugin "$PLUGIN" > "$work/rank$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1 2; do wait "${pids[$r]}" || fail "rank $r exited with an error: $(grep -v INFO "$work/rank$r.log" | tail -3)"; done
for r in 0 1 2; do
  grep -q '^DONE .*"wrong":0,"failed":0' "$work/rank$r.log" || fail "rank $r: $(grep DONE "$work/rank$r.log")"
  n=$(grep -cE 'TCP (send|receive) connection .* on 2 rail\(s\): eth0 [-<>]+ [0-9.]+ \(lanes [0-9,]+\), eth1 [-<>]+ 10\.88\.1\.[0-9]+ \(lanes [0-9,]+\)' "$work/rank$r.log" || true)
  [ "$n" = 4 ] || fail "rank $r: $n of its 4 connections name both rails: $(grep -E 'TCP (send|receive) connection' "$work/rank$r.log" | head -4)"
  iters=$(sed -n 's/^DONE {"rank":[0-9]*,"iters":\([0-9]*\).*/\1/p' "$work/rank$r.log")
  echo "multirail: rank $r: $iters iterations of 4 MiB to each peer, 0 wrong bytes, every connection on both rails"
done
for h in 0 1 2; do
  d0=$(( $(txbytes $h 0) - before0[$h] )); d1=$(( $(txbytes $h 1) - before1[$h] ))
  share=$(( 100 * d1 / (d0 + d1) ))
  echo "multirail: host $h sent $d0 bytes on eth0, $d1 on eth1 ($share% on eth1)"
  [ "$share" -ge 20 ] || fail "host $h: eth1 carried $share% of the bytes"
done

# --- 2. shares follow the rails' rates ---
"$bed" link --name "$name" 0 0 800mbit
"$bed" link --name "$name" 0 1 400mbit
perf_run() {  # perf_run TAG ENV...: host 0 sends to host 1; prints GB/s
  local tag=$1; shift
  local port=$((20000 + RANDOM % 20000))
  "$bed" exec --name "$name" 0 -- env "${common[@]}" "$@" "$PERF" --plugin "$PLUGIN" --server --port "$port" \
    --bw-only --min 4M --max 4M --window 8 --bw-bytes 512M > "$work/perf-$tag.server.log" 2>&1 &
  local srv=$!
  for _ in $(seq 100); do grep -q "waiting for the client" "$work/perf-$tag.server.log" 2>/dev/null && break; sleep 0.05; done
  "$bed" exec --name "$name" 1 -- env "${common[@]}" "$@" "$PERF" --plugin "$PLUGIN" --client "10.88.0.1:$port" \
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
echo "multirail: PASS"
