#!/usr/bin/env bash
# The straggler and hang cases across emulated hosts, without a GPU: NRANKS ranks of icn-diag-cluster-driver (an
# all-to-all per iteration through the plugin's TCP transport, every byte checked), one per host of
# tools/testbed/icn-testbed, with the tuner off and its network rendezvous on (the diagnosis's gathering at the
# agreement leader, rank 0's process). In one job, with rank K injected in turn:
#   delay  K sleeps DELAY_US (20 ms) before each iteration: an 'ICN straggler:' line must name K late
#   link   K's link (both ends) shaped to SLOW_RATE: a line must name a link from or to K (or K late)
#   throttle  K's process stopped about 10 ms of every 20 ms (SIGSTOP/SIGCONT): a line must name K late
#   hang   K stopped (SIGSTOP): another rank must WARN 'no network progress', and icn-hang on the job's report
#          directory must name K (missing_process); then SIGCONT
# each within LIMIT_S seconds of the injection; then the job must end with every rank's data right.
#   test/diagnose/cluster_cases.sh DRIVER PLUGIN ICN_HANG TESTBED
# Env: NRANKS (4), K (2: the injected rank), ROUNDS (1) and INJECT_RANKS ("$K"): each case runs ROUNDS times, the
#      rank rotating over INJECT_RANKS; HEALTHY_S (0): first that many seconds untouched, every finding in them
#      counted as false; LIMIT_S (30), SLOW_RATE, RATE (every host's link shaped to it from the start, SLOW_RATE
#      below it; default: unshaped, the links then run at what the CPUs copy), REPORT_S (1: the straggler period),
#      DELAY_US, BYTES. Prints a Markdown table of the injections.
# Exit 0: every case named and the job finished clean; 77: this machine cannot make emulated hosts; 1 otherwise.
set -uo pipefail
[ $# = 4 ] || { sed -n '2,18p' "$0"; exit 2; }
DRIVER=$1 PLUGIN=$2 HANG=$3 BED=$4
NRANKS=${NRANKS:-4}
K=${K:-2}
ROUNDS=${ROUNDS:-1}
INJECT_RANKS=${INJECT_RANKS:-$K}
HEALTHY_S=${HEALTHY_S:-0}
LIMIT_S=${LIMIT_S:-30}
SLOW_RATE=${SLOW_RATE:-50mbit}
RATE=${RATE:-}
REPORT_S=${REPORT_S:-1}
DELAY_US=${DELAY_US:-20000}
BYTES=${BYTES:-65536}
name=icnd$$
work=$(mktemp -d /tmp/icn-cluster-XXXXXX)
chmod 700 "$work"
mkdir -m 700 "$work/hang"
pids=()
failures=0

cleanup() {
  [ -n "${throttler:-}" ] && kill "$throttler" 2>/dev/null
  for p in $(cat "$work"/pid.* 2>/dev/null); do kill -CONT "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  "$BED" down --name "$name" >/dev/null 2>&1
  if [ -n "${KEEP:-}" ]; then echo "work kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

"$BED" up --name "$name" --hosts "$NRANKS" >"$work/bed.log" 2>&1
rc=$?
if [ $rc = 77 ]; then echo "SKIP: cannot create emulated hosts"; exit 77; fi
[ $rc = 0 ] || { cat "$work/bed.log"; exit 1; }
addr0=$("$BED" addr --name "$name" 0)
subnet=$(echo "$addr0" | sed 's/\.[0-9]*$//' | sed 's/\./\\./g')
key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }

# wait_for SECONDS COMMAND...: polls COMMAND every 0.5 s; status 0 once it succeeds.
wait_for() {
  local end=$(($(date +%s) + $1)); shift
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.5
  done
}

# mark: remembers where every rank's log ends; since_mark: the raised findings (not the clearing lines) logged after.
declare -A marks
mark() { local f; for f in "$work"/rank*.log; do marks[$f]=$(stat -c %s "$f"); done; }
since_mark() {
  local f
  for f in "$work"/rank*.log; do tail -c +$((${marks[$f]:-0} + 1)) "$f"; done |
    grep "ICN straggler:" | grep -v "no longer\|rate again"
}
# Whether the leader (rank 0's process, which names late ranks) holds a raised finding that rank $1 is late: its
# last line on it raised one. On two shared cores noise alone can name a rank for a few periods; a case injects only
# once that is over, so what it sees raised is the injection's.
late_active() {
  grep -E "ICN straggler: .*rank $1 on \S+ .* is (late|no longer late)" "$work/rank0.log" | tail -n 1 |
    grep -qv "no longer late"
}
quiet() { ! late_active "$K"; }
# settle CASE: the case injects rank K only while the leader holds no raised finding on it (a finding still raised
# from an earlier injection, or from noise, would hide the new one's raise and cannot be told from it). K gets up to
# 20 s to clear; then the case takes another rank that holds none (the rank it injects is the one it records).
settle() {
  local r
  wait_for 20 quiet && return 0
  for r in $(seq 1 $((NRANKS - 1))) 0; do
    if ! late_active "$r"; then echo "note: rank $K still named late before the $1; the $1 takes rank $r"; K=$r; return 0; fi
  done
  echo "note: every rank is named late before the $1"
}
named_late() { since_mark | grep -qE "rank $1 on \S+ .* is late"; }
named_link() { since_mark | grep -qE "rank $1 on \S+ .* is late|link rank $1 on |-> rank $1 on "; }
hang_warned() {
  local r f
  for r in $(seq 0 $((NRANKS - 1))); do
    [ "$r" = "$K" ] && continue
    f=$work/rank$r.log
    tail -c +$((${marks[$f]:-0} + 1)) "$f" | grep -q "WARN ICN no network progress" && return 0
  done
  return 1
}
hang_named() { "$HANG" "$work/hang" 2>/dev/null | grep -qE "Rank $K on \S+ .*did not report"; }
set_rate() {  # HOST RATE: tbf on both ends of the host's link
  ip netns exec "$name-h$1" tc qdisc replace dev eth0 root tbf rate "$2" burst 256kb latency 50ms &&
    ip netns exec "$name-sw" tc qdisc replace dev "p$1" root tbf rate "$2" burst 256kb latency 50ms
}
clear_rate() {  # HOST: back to RATE (or unshaped)
  if [ -n "$RATE" ]; then set_rate "$1" "$RATE"; return; fi
  ip netns exec "$name-h$1" tc qdisc del dev eth0 root 2>/dev/null
  ip netns exec "$name-sw" tc qdisc del dev "p$1" root 2>/dev/null
}
if [ -n "$RATE" ]; then
  for r in $(seq 0 $((NRANKS - 1))); do set_rate "$r" "$RATE" || { fail "cannot shape host $r's link to $RATE"; exit 1; }; done
fi

for r in $(seq 0 $((NRANKS - 1))); do
  "$BED" exec --name "$name" "$r" -- env ICN_TRANSPORT=tcp ICN_TUNER=off \
    ICN_TUNER_RENDEZVOUS="tcp://$addr0:29650" ICN_AUTH_KEY="$key" ICN_STRAGGLER_REPORT_S="$REPORT_S" ICN_HANG_REPORT_S=2 \
    ICN_HANG_REPORT_DIR="$work/hang" NCCL_DEBUG=INFO \
    "$DRIVER" --rank "$r" --nranks "$NRANKS" --dir "$work" --seconds 7200 --bytes "$BYTES" --plugin "$PLUGIN" \
    >"$work/rank$r.out" 2>"$work/rank$r.log" &
  pids+=($!)
done
if ! wait_for 60 grep -q PROGRESS "$work/rank0.out"; then
  tail -n 20 "$work"/rank*.log
  fail "the job did not start within 60 s"
  exit 1
fi
# Every connection went to another host over its link: each rank logged one send and one receive connection per
# peer, each to a host of the test bed by its address there (never loopback).
for r in $(seq 0 $((NRANKS - 1))); do
  conns=$(grep -cE "ICN TCP (send|receive) connection (to|from) " "$work/rank$r.log")
  crossed=$(grep -E "ICN TCP (send|receive) connection (to|from) $name-h[0-9]+:[0-9]+ \($subnet\.[0-9]+:" \
    "$work/rank$r.log" | grep -vc "$name-h$r:")
  if [ "$conns" = $((2 * (NRANKS - 1))) ] && [ "$crossed" = "$conns" ]; then
    echo "path: rank $r's $conns connections cross to other hosts"
  else
    fail "rank $r: $crossed of $conns connection(s) cross to another host ($((2 * (NRANKS - 1))) expected)"
  fi
done
sleep 4  # a few straggler periods of normal traffic first

# record CASE RANK SECONDS|"": one injection's outcome, for the table at the end (healthy: the findings' count).
record() { echo "$1 $2 ${3:--}" >>"$work/injections"; }

case_healthy() {
  [ "$HEALTHY_S" -gt 0 ] || return 0
  mark; sleep "$HEALTHY_S"
  local n; n=$(since_mark | wc -l)
  echo "healthy: $n finding(s) in $HEALTHY_S s untouched"
  since_mark | sed 's/^\[[0-9]*\] INFO //' | head -n 5
  record healthy - "$n"
}

case_delay() {
  local t0
  settle delay
  t0=$(now); mark
  echo "$DELAY_US" >"$work/delay.$K"
  if wait_for "$LIMIT_S" named_late "$K"; then
    echo "delay: rank $K named late after $(since "$t0") s"; record delay "$K" "$(since "$t0")"
  else fail "delay: rank $K ($DELAY_US us before each iteration) not named late within $LIMIT_S s"; record delay "$K"; fi
  rm -f "$work/delay.$K"
  sleep 4
}

case_link() {
  local t0
  settle link
  t0=$(now); mark
  set_rate "$K" "$SLOW_RATE" || fail "link: cannot shape host $K's link"
  if wait_for "$LIMIT_S" named_link "$K"; then
    echo "link: rank $K's link ($SLOW_RATE) named after $(since "$t0") s"; record link "$K" "$(since "$t0")"
  else fail "link: rank $K's link shaped to $SLOW_RATE not named within $LIMIT_S s"; record link "$K"; fi
  clear_rate "$K"
  sleep 4
}

case_throttle() {
  local t0 kpid
  settle throttle
  t0=$(now); mark
  kpid=$(cat "$work/pid.$K")
  ( while [ ! -f "$work/unthrottle" ]; do kill -STOP "$kpid"; sleep 0.01; kill -CONT "$kpid"; sleep 0.01; done
    kill -CONT "$kpid" ) &
  throttler=$!
  if wait_for "$LIMIT_S" named_late "$K"; then
    echo "throttle: rank $K (stopped 10 ms of every 20) named late after $(since "$t0") s"
    record throttle "$K" "$(since "$t0")"
    since_mark | grep -m1 -oE "rank $K on \S+ .* is late.*" | sed 's/^/throttle: /'
  else
    fail "throttle: rank $K (stopped 10 ms of every 20) not named late within $LIMIT_S s"; record throttle "$K"
  fi
  touch "$work/unthrottle"
  wait "$throttler"
  throttler=""
  rm -f "$work/unthrottle"
  sleep 4
}

case_hang() {
  local t0 kpid
  rm -f "$work"/hang/icn-hang-*.json  # an earlier hang's reports
  t0=$(now); mark
  kpid=$(cat "$work/pid.$K")
  kill -STOP "$kpid"
  if wait_for "$LIMIT_S" hang_warned; then echo "hang: another rank WARNed after $(since "$t0") s"
  else fail "hang: no other rank WARNed 'no network progress' within $LIMIT_S s of stopping rank $K"; fi
  if wait_for "$LIMIT_S" hang_named; then
    echo "hang: icn-hang named rank $K after $(since "$t0") s"; record hang "$K" "$(since "$t0")"
  else
    "$HANG" "$work/hang" | head -n 20
    fail "hang: icn-hang did not name the stopped rank $K within $LIMIT_S s"; record hang "$K"
  fi
  kill -CONT "$kpid"
  [ "$ROUNDS" = 1 ] || sleep 6  # the job moves again (every process writes its 'resumed' report) first
}

: >"$work/injections"
case_healthy
ranks=($INJECT_RANKS)
for c in delay link throttle hang; do
  for i in $(seq 0 $((ROUNDS - 1))); do
    K=${ranks[$((i % ${#ranks[@]}))]}
    "case_$c"
  done
done

touch "$work/stop"
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then fail "rank $i exited with an error"; tail -n 20 "$work/rank$i.log"; fi
  grep -h '^DONE' "$work/rank$i.out" || fail "rank $i printed no DONE line"
  grep -q '^DONE .*"wrong":0,"failed":0' "$work/rank$i.out" || fail "rank $i: wrong data or a failed call"
done
pids=()
# Findings that name no injected rank are printed, not judged: on two shared cores every rank's pace is the
# scheduler's (the GPU proof counts them on a larger machine).
pat=$(for k in $INJECT_RANKS; do printf 'rank %s on \\S+ .* is late|link rank %s on |-> rank %s on |' "$k" "$k" "$k"; done)
others=$(grep -h "ICN straggler:" "$work"/rank*.log | grep -v "no longer\|rate again" | grep -vcE "${pat%|}")
echo "findings naming neither an injected rank nor its link: $others"
grep -h "ICN straggler:" "$work"/rank*.log | sed 's/^\[[0-9]*\] INFO //' | sort | uniq | head -n 20
# The injections by detection time (the unnamed first), so each case's times arrive in order.
sort -k3,3n "$work/injections" | awk '
  $1 == "healthy" { healthy = $3; next }
  { n[$1]++; if ($3 != "-") { t[$1, ++ok[$1]] = $3; if ($3 <= 10) in10[$1]++ } }
  END {
    print "| case | injections | named | within 10 s | detection median / max (s) |"
    print "|---|---|---|---|---|"
    if (healthy != "") print "| healthy | - | - | - | " healthy " finding(s) |"
    split("delay link throttle hang", order, " ")
    for (o = 1; o <= 4; o++) {
      c = order[o]; if (!(c in n)) continue
      k = ok[c] + 0; med = "-"; mx = "-"
      if (k) { med = (k % 2) ? t[c, (k + 1) / 2] : (t[c, k / 2] + t[c, k / 2 + 1]) / 2; mx = t[c, k] }
      printf "| %s | %d | %d | %d | %s / %s |\n", c, n[c], k, in10[c] + 0, med, mx
    }
  }'
if [ "$failures" = 0 ]; then echo "PASS: every case named, every byte right"; exit 0; fi
echo "FAIL: $failures check(s) failed"
exit 1
