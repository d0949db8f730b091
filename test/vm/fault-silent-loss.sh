# Verbs silent loss (verbs_fault in guest-init.sh): both veths drop to MTU 1500, below rxe's 4 KiB path MTU:
# every data packet is lost while the ports stay ACTIVE, so only the QPs' retry budget can turn it into an error.
if [ ! -x /opt/icn/bin/icn-reliability ]; then fail "verbs-faults (icn-reliability not in this build)"; else
  c=/sys/class/infiniband/rxe1/ports/1/hw_counters
  before=$(cat $c/send_err 2>/dev/null)
  verbs_fault verbs-silent-loss "ip link set dev veth0 mtu 1500 && ip link set dev veth1 mtu 1500" \
    "ip link set dev veth0 mtu 9000 && ip link set dev veth1 mtu 9000"
  # Why rxe itself never reports it: the sender's own IP layer refuses each oversized packet, rxe counts a
  # send error, rolls the request back and resends without arming its retransmit timer (so no
  # RETRY_EXC_ERR). The counters of the sending device show it.
  for n in send_err retry_exceeded_err completer_retry_err; do
    [ -r $c/$n ] && result "rxe1_$n" "$(cat $c/$n)"
  done
  [ -n "$before" ] && result rxe1_send_err_before "$before"
  # The silent loss must have been caught by the QP retry budget, not by a port event.
  if grep -qiE 'retry|retries' /tmp/verbs-silent-loss.log && ! grep -q 'port error' /tmp/verbs-silent-loss.log; then
    pass verbs-silent-loss-by-retry-budget
  else
    fail verbs-silent-loss-by-retry-budget
  fi
fi
