#!/usr/bin/env bash
# The harness's across-hosts mode (pair_remote.h) on one machine: two processes of a suite, one rank each,
# joined over TCP on loopback, must pass together; two processes that disagree on the test must both fail
# at once instead of hanging.
#   remote_selftest.sh SUITE FILTER
set -uo pipefail
suite=$1 filter=$2
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    [[ -z $(ss -Htan "sport = :$p or dport = :$p") ]] && { echo "$p"; return; }
  done
  echo "no free port" >&2; exit 1
}
log=$(mktemp -d /tmp/icn-pair-remote.XXXXXX)
trap 'rm -rf "$log"' EXIT

# pair FILTER0 FILTER1: prints "rc0 rc1".
pair() {
  local port
  port=$(free_port) || exit 1
  ICN_PAIR_RANK=0 ICN_PAIR_PEER=":$port" timeout 120 "$suite" --gtest_filter="$1" > "$log/r0" 2>&1 &
  local p0=$!
  ICN_PAIR_RANK=1 ICN_PAIR_PEER="127.0.0.1:$port" timeout 120 "$suite" --gtest_filter="$2" > "$log/r1" 2>&1
  local rc1=$?
  wait $p0
  echo "$? $rc1"
}

rcs=$(pair "$filter" "$filter")
grep -hE '^\[ *(OK|FAILED|PASSED) ' "$log/r0" "$log/r1"
if [[ $rcs != "0 0" ]] || ! grep -q '^\[  PASSED  \]' "$log/r0" || ! grep -q '^\[  PASSED  \]' "$log/r1"; then
  echo "remote_selftest: FAIL: the pair across processes failed (exit codes $rcs)"
  grep -hE 'Failure|WARN' -A2 "$log/r0" "$log/r1" | head -n 40
  exit 1
fi
rcs=$(pair "Transfer.EverySizeByteExact" "Transfer.ZeroByteMessagesInterleaved")
if [[ $rcs == "1 1" ]] && grep -q "the peer host runs Transfer.Zero" "$log/r0" && grep -q "the peer host runs Transfer.Every" "$log/r1"; then
  echo "remote_selftest: PASS (mismatched tests fail on both sides)"
else
  echo "remote_selftest: FAIL: mismatched tests gave exit codes $rcs"
  tail -n 20 "$log/r0" "$log/r1"
  exit 1
fi
