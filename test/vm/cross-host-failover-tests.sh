# Verbs failover across two hosts (run-vm.sh --guests 2 --nics 2): each guest has rxe0 on eth0 (link 0, which also
# carries the out-of-band socket and the harness's pipe) and rxe1 on eth1 (link 1); each rank fuses both. Rank 0
# (the receiver) runs in guest a and takes its own eth1 down mid-stream: guest b's rxe1 sees no port event, so
# the sender learns of the dead link from the receiver's report (test/reliability, VerbsFailover.*). Then link 1
# down, back 2 s later (re-admitted once both ports are up: the sender's first offers are refused), and down again.
# The receiver brings eth1 back up before it closes (ICN_REL_FAILOVER_RESTORE): the guest kernel's Soft-RoCE frees
# a QP's socket while packets of it may still sit in the downed virtio ring, and eth1 coming up after the QPs are
# gone reclaims them through freed memory (an oops in rxe_skb_tx_dtor).
restore='/usr/sbin/ip link set dev eth1 up; i=0; while [ $i -lt 50 ] && ! grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state; do sleep 0.1; i=$((i + 1)); done; sleep 0.5'
me=$ICN_VM_ROLE
if [ "$me" = a ]; then rank=0; else rank=1; fi
port=18900
for tc in OneLinkDownMidStreamLosesNothing LinkBackIsReadmittedAndCarriesTheStream; do
  port=$((port + 1))
  if [ "$me" = a ]; then where=":$port"; else where="$ICN_VM_PEER:$port"; fi
  name="xfailover-$tc"
  if ICN_PAIR_RANK=$rank ICN_PAIR_PEER=$where ICN_PLUGIN_PATH=/opt/icn/lib/libnccl-net-icn.so timeout 450 env \
       ICN_SOCKET_IFNAME=eth0 ICN_REL_FAILOVER_HCA0="=rxe0,rxe1" ICN_REL_FAILOVER_HCA1="=rxe0,rxe1" \
       ICN_REL_FAILOVER_LINK=1 ICN_REL_FAILOVER_LINK2=1 ICN_REL_FAILOVER_DOWN="ip link set dev eth1 down" \
       ICN_REL_FAILOVER_UP="ip link set dev eth1 up" ICN_REL_FAILOVER_DOWN2="ip link set dev eth1 down" \
       ICN_REL_FAILOVER_RESTORE="$restore" \
       icn-reliability --gtest_filter="VerbsFailover.$tc" > "/tmp/$name.log" 2>&1; then rc=0; else rc=$?; fi
  grep -E "FAILOVER|SKIPPED|^  rank $rank .*(WARN|re-admitted|refused|report|moved)" "/tmp/$name.log" | head -n 30
  if grep -q SKIPPED "/tmp/$name.log"; then fail "$name-not-skipped@$me"
  elif [ $rc = 0 ]; then pass "$name@$me"
  else
    grep -E -A4 'Failure$' "/tmp/$name.log" | head -n 40
    fail "$name@$me rc=$rc"
  fi
  v=$(sed -n 's/.*FAILOVER receiver:.*stall after the[a-z ]* fault \([0-9.]*\) s.*/\1/p' "/tmp/$name.log" | head -n 1)
  [ -n "$v" ] && [ "$me" = a ] && result "xfailover_${tc}_stall_s" "$v"
  /usr/sbin/ip link set dev eth1 up
  i=0
  while [ $i -lt 100 ] && ! grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state; do sleep 0.1; i=$((i + 1)); done
done
