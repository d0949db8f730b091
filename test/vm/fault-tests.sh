# Verbs link down (verbs_fault in guest-init.sh): veth0 (rxe0's netdev) goes down: rxe reports the port down.
if [ ! -x /opt/icn/bin/icn-reliability ]; then fail "verbs-faults (icn-reliability not in this build)"; else
  verbs_fault verbs-link-down "ip link set dev veth0 down" "ip link set dev veth0 up"
fi
