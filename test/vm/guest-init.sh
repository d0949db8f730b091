#!/bin/sh
# /init of the Soft-RoCE guest (busybox sh). Sets up the rxe pair (or, as one of two guests, one rxe device on
# the virtio NIC), runs /tests.sh with the helpers below and reports on the serial console; the host
# (run-vm.sh) parses the ICN-VM-* lines.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
. /etc/icn-env
# Two-guest mode: run-vm.sh passes icn.role/host/addr/peer on the kernel command line.
ICN_VM_ROLE=""
for arg in $(cat /proc/cmdline); do
  case $arg in
    icn.role=*) ICN_VM_ROLE=${arg#*=} ;;
    icn.host=*) echo "${arg#*=}" > /etc/hostname ;;
    icn.addr=*) ICN_VM_ADDR=${arg#*=} ;;
    icn.peer=*) ICN_VM_PEER=${arg#*=} ;;
    icn.addr2=*) ICN_VM_ADDR2=${arg#*=} ;;
    icn.peer2=*) ICN_VM_PEER2=${arg#*=} ;;
  esac
done
export ICN_VM_ROLE ICN_VM_ADDR ICN_VM_PEER ICN_VM_ADDR2 ICN_VM_PEER2
hostname -F /etc/hostname
echo; echo "ICN-VM-BOOTED $(uname -r) cpus=$(nproc)"

finish() {
  echo "ICN-VM-DONE"
  sync
  reboot -f  # qemu runs with -no-reboot: this ends the VM
  sleep 5
  echo b > /proc/sysrq-trigger
}

pass() { echo "ICN-VM-CHECK PASS $*"; }
fail() { echo "ICN-VM-CHECK FAIL $*"; }
result() { echo "ICN-VM-RESULT $1=$2"; }

# check NAME TIMEOUT CMD...: one command, output kept in /tmp/NAME.log and shown on failure.
check() {
  name=$1; t=$2; shift 2
  if timeout "$t" "$@" > "/tmp/$name.log" 2>&1; then pass "$name"
  else rc=$?; tail -n 40 "/tmp/$name.log"; fail "$name rc=$rc"; fi
}

# pair NAME TIMEOUT "SERVER CMD" "CLIENT CMD": two processes, server first; both must exit 0.
pair() {
  name=$1; t=$2
  sh -c "exec timeout $t $3" > "/tmp/$name.server.log" 2>&1 &
  spid=$!
  sleep 1
  crc=0; timeout "$t" sh -c "$4" > "/tmp/$name.client.log" 2>&1 || crc=$?
  src=0; wait "$spid" || src=$?
  if [ "$crc" = 0 ] && [ "$src" = 0 ]; then pass "$name"
  else
    echo "--- $name server (rc=$src)"; tail -n 40 "/tmp/$name.server.log"
    echo "--- $name client (rc=$crc)"; tail -n 40 "/tmp/$name.client.log"
    fail "$name server=$src client=$crc"
  fi
}

# Full paths for iproute2: busybox sh prefers its own applets (its ip cannot create veth pairs).
# conformance NAME GTEST_FILTER ENV=VALUE...: the plugin's conformance suite (icn-conformance), with a
# per-test summary and, on failure, the assertions and the plugin's warnings.
conformance() {
  name=$1; filter=$2; shift 2
  if [ ! -x /opt/icn/bin/icn-conformance ]; then fail "$name (icn-conformance not in this build)"; return; fi
  if ICN_PLUGIN_PATH=/opt/icn/lib/libnccl-net-icn.so UCX_WARN_UNUSED_ENV_VARS=n timeout 400 env "$@" \
       icn-conformance "--gtest_filter=$filter" > "/tmp/$name.log" 2>&1; then rc=0; else rc=$?; fi
  grep -E '^\[ *(OK|FAILED) ' "/tmp/$name.log" | sed "s|^|$name: |"
  if [ $rc = 0 ]; then pass "$name"; return; fi
  grep -E -A4 'Failure$' "/tmp/$name.log" | head -n 80
  grep -E 'WARN' "/tmp/$name.log" | sort | uniq -c | sort -rn | head -n 20
  fail "$name rc=$rc"
}

# Verbs fault (owned by test/reliability, VerbsFault.*): rank 0 on rxe0, rank 1 on rxe1, out-of-band socket on
# lo. Mid-transfer rank 0 runs CMD; both ranks must fail within 30 s with a WARN naming the peer and close
# cleanly. RESTORE undoes the fault afterwards. Usage: verbs_fault NAME CMD RESTORE.
verbs_fault() {
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

setup_rxe() {
  for m in $(cat /modules/order); do
    insmod "/modules/$m" || { echo "setup: insmod $m failed"; return 1; }
  done
  /usr/sbin/ip link set lo up
  # No duplicate address detection: link-local GIDs must be usable at once.
  sysctl -qw net.ipv6.conf.all.accept_dad=0
  sysctl -qw net.ipv6.conf.default.accept_dad=0
  # MTU 9000: rxe sends 4 KiB path-MTU packets; a 1500 MTU drops them (ACK timeouts).
  /usr/sbin/ip link add veth0 mtu 9000 type veth peer name veth1 mtu 9000 || { echo "setup: veth failed"; return 1; }
  /usr/sbin/ip link set veth0 up && /usr/sbin/ip link set veth1 up || return 1
  rdma link add rxe0 type rxe netdev veth0 || { echo "setup: rdma link add rxe0 failed"; return 1; }
  rdma link add rxe1 type rxe netdev veth1 || { echo "setup: rdma link add rxe1 failed"; return 1; }
  devs="rxe0 rxe1"
  # ICN_VM_RXE_PAIRS=2: a second link, veth2 <-> veth3 with rxe2 and rxe3 (two ports per rank).
  if [ "${ICN_VM_RXE_PAIRS:-1}" = 2 ]; then
    /usr/sbin/ip link add veth2 mtu 9000 type veth peer name veth3 mtu 9000 || { echo "setup: veth2 failed"; return 1; }
    /usr/sbin/ip link set veth2 up && /usr/sbin/ip link set veth3 up || return 1
    rdma link add rxe2 type rxe netdev veth2 || { echo "setup: rdma link add rxe2 failed"; return 1; }
    rdma link add rxe3 type rxe netdev veth3 || { echo "setup: rdma link add rxe3 failed"; return 1; }
    devs="$devs rxe2 rxe3"
  fi
  # Wait for every port to turn ACTIVE with a link-local GID at index 0.
  i=0
  while [ $i -lt 100 ]; do
    ok=1
    for d in $devs; do
      grep -q ACTIVE /sys/class/infiniband/$d/ports/1/state 2>/dev/null || ok=0
      grep -q '^fe80' /sys/class/infiniband/$d/ports/1/gids/0 2>/dev/null || ok=0
    done
    [ $ok = 1 ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  echo "setup: rxe ports ($devs) not ACTIVE with a link-local GID after 10 s"
  return 1
}

# One rxe device (rxe0) on the virtio NIC (eth0) with this guest's IPv4 address, for a two-guest run.
setup_rxe_host() {
  for m in $(cat /modules/order); do
    insmod "/modules/$m" || { echo "setup: insmod $m failed"; return 1; }
  done
  /usr/sbin/ip link set lo up
  i=0
  while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  # MTU 9000 as on the veth pair: rxe's 4 KiB path-MTU packets must fit.
  /usr/sbin/ip link set eth0 mtu 9000 || { echo "setup: eth0 MTU 9000 refused"; return 1; }
  /usr/sbin/ip addr add "$ICN_VM_ADDR/24" dev eth0 && /usr/sbin/ip link set eth0 up || return 1
  rdma link add rxe0 type rxe netdev eth0 || { echo "setup: rdma link add rxe0 failed"; return 1; }
  devs=rxe0
  # A second NIC (run-vm.sh --nics 2): eth1 on the second link with rxe1.
  if [ -n "$ICN_VM_ADDR2" ]; then
    i=0
    while [ ! -e /sys/class/net/eth1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    /usr/sbin/ip link set eth1 mtu 9000 || { echo "setup: eth1 MTU 9000 refused"; return 1; }
    /usr/sbin/ip addr add "$ICN_VM_ADDR2/24" dev eth1 && /usr/sbin/ip link set eth1 up || return 1
    rdma link add rxe1 type rxe netdev eth1 || { echo "setup: rdma link add rxe1 failed"; return 1; }
    devs="rxe0 rxe1"
  fi
  i=0
  while [ $i -lt 100 ]; do
    ok=1
    for d in $devs; do
      grep -q ACTIVE /sys/class/infiniband/$d/ports/1/state 2>/dev/null && [ -n "$(ipv4_gid_index $d)" ] || ok=0
    done
    [ $ok = 1 ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  echo "setup: $devs not ACTIVE with an IPv4 GID after 10 s"
  return 1
}

# Index of an rxe device's (default rxe0) IPv4-mapped GID (::ffff:a.b.c.d), the one ICN picks when the NIC has an
# IPv4 address.
ipv4_gid_index() {
  for g in /sys/class/infiniband/${1:-rxe0}/ports/1/gids/*; do
    case $(cat "$g" 2>/dev/null) in 0000:0000:0000:0000:0000:ffff:*) echo "${g##*/}"; return ;; esac
  done
}

if [ -n "$ICN_VM_ROLE" ]; then
  if setup_rxe_host; then
    pass "rxe-setup-$ICN_VM_ROLE $(hostname) $ICN_VM_ADDR mtu $(cat /sys/class/net/eth0/mtu) gid $(ipv4_gid_index) $(cat /sys/class/infiniband/rxe0/ports/1/gids/$(ipv4_gid_index))"
    . /tests.sh
  else
    fail "rxe-setup-$ICN_VM_ROLE"
    dmesg | tail -n 30
    rdma link 2>&1
  fi
elif setup_rxe; then
  pass "rxe-setup $(cat /sys/class/infiniband/rxe0/ports/1/gids/0) $(cat /sys/class/infiniband/rxe1/ports/1/gids/0)"
  . /tests.sh
else
  fail "rxe-setup"
  dmesg | tail -n 30
  rdma link 2>&1
fi
finish
