# Verbs failover (owned by test/reliability, VerbsFailover.*): two links, rxe0 <-> rxe1 over veth0/veth1 and
# rxe2 <-> rxe3 over veth2/veth3 (guest-init.sh with ICN_VM_RXE_PAIRS=2); each rank fuses its two devices and the
# out-of-band socket stays on lo. Link 0 goes down mid-stream (every message must still arrive intact), then
# both links in turn (a clean error on both sides, never a hang).
if [ ! -x /opt/icn/bin/icn-reliability ]; then fail "verbs-failover (icn-reliability not in this build)"; else
  # The last run: four QPs per connection, two on each link.
  # The re-admission run (LinkBackIsReadmittedAndCarriesTheStream) is in cross-host-failover-tests.sh: here, with
  # the other link dying after the return, it once failed the connection in six runs (host under load), before
  # rejoin answers named the offer they answer.
  for tc in OneLinkDownMidStreamLosesNothing LastLinkDownFailsBothSides OneLinkDownMidStreamLosesNothing/qps4; do
    qps=1
    case $tc in */qps4) tc=${tc%/qps4}; qps=4 ;; esac
    # (check keeps its timeout in $t: the loop variable is $tc)
    check "failover-$tc-qps$qps" 200 env ICN_PLUGIN_PATH=/opt/icn/lib/libnccl-net-icn.so \
      ICN_IB_QPS_PER_CONNECTION=$qps \
      ICN_REL_FAILOVER_DOWN="ip link set dev veth0 down" ICN_REL_FAILOVER_DOWN2="ip link set dev veth2 down" \
      ICN_REL_FAILOVER_UP="ip link set dev veth0 up" \
      icn-reliability --gtest_filter="VerbsFailover.$tc"
    log=/tmp/failover-$tc-qps$qps.log
    grep -E 'FAILOVER|SKIPPED|WARN|resent|moved|report|re-admitted|refused|QP\(s\)' "$log" | head -n 30
    if grep -q SKIPPED "$log"; then fail "failover-$tc-qps$qps-not-skipped"; fi
    for l in "FAILOVER receiver:.*stall after the fault \([0-9.]*\) s:stall_s" \
             "FAILOVER receiver:.*error \([0-9.]*\) s after the last link:last_link_error_s"; do
      v=$(sed -n "s/.*${l%%:*}.*/\1/p" "$log" | head -n 1)
      [ -n "$v" ] && result "failover_${tc}_qps${qps}_${l##*:}" "$v"
    done
    /usr/sbin/ip link set dev veth0 up; /usr/sbin/ip link set dev veth2 up
    # rxe turns the ports ACTIVE again once the carrier is back.
    i=0
    while [ $i -lt 100 ]; do
      n=$(grep -l ACTIVE /sys/class/infiniband/rxe*/ports/1/state 2>/dev/null | wc -l)
      [ "$n" = 4 ] && break
      sleep 0.1; i=$((i + 1))
    done
  done
fi
