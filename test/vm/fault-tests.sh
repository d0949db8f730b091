# Verbs faults (owned by test/reliability): rank 0 on rxe0, rank 1 on rxe1, out-of-band socket on lo. Mid-transfer
# rank 0 injects the fault; both ranks must fail within 30 s with a WARN naming the peer and close cleanly.
#   link-down:    veth0 (rxe0's netdev) goes down: rxe reports the port down.
#   (silent loss: see fault-silent-loss.sh)
fault() {
  name=$1; cmd=$2; restore=$3
  check "$name" 240 env ICN_PLUGIN_PATH=/opt/icn/lib/libnccl-net-icn.so ICN_REL_VERBS_FAULT_CMD="$cmd" \
    icn-reliability --gtest_filter='VerbsFault.*'
  grep -E 'NETNS|SKIPPED|WARN' "/tmp/$name.log" | head -n 20
  # A skip would mean the command did not reach the test: a failure here.
  if grep -q SKIPPED "/tmp/$name.log"; then fail "$name-not-skipped"; fi
  for side in sender receiver; do
    t=$(sed -n "s/.*NETNS $side: .*error \([0-9.]*\) s after link down.*/\1/p" "/tmp/$name.log")
    [ -n "$t" ] && result "${name}_${side}_s" "$t"
  done
  sh -c "$restore"
  sleep 2
}
if [ ! -x /opt/icn/bin/icn-reliability ]; then fail "verbs-faults (icn-reliability not in this build)"; else
  fault verbs-link-down "ip link set dev veth0 down" "ip link set dev veth0 up"
fi
