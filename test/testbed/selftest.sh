#!/usr/bin/env bash
# Checks the promises of tools/testbed/icn-testbed: per-host hostname, NCCL_HOSTID and /sys, addresses
# reachable across the bridge with the MTU asked for, netem shaping applied, and nothing left after down
# (also when the command run in a host fails).
set -euo pipefail
bed=$1
name="icnself$$"
fail() { echo "FAIL: $*"; "$bed" down --name "$name"; exit 1; }
# Delay needs the kernel's netem; where it is missing only the rate (tbf) is shaped and checked.
netem=1
"$bed" up --name "$name" --hosts 3 --mtu 4000 --delay 1ms --rate 10gbit 2>/dev/null || netem=0
if [ "$netem" = 0 ]; then
  echo "this kernel has no netem qdisc: checking rate shaping (tbf) only, not delay"
  "$bed" up --name "$name" --hosts 3 --mtu 4000 --rate 10gbit
fi

for i in 0 1 2; do
  out=$("$bed" exec --name "$name" "$i" -- sh -c 'echo "$(hostname) $NCCL_HOSTID $(ls /sys/class/net | tr "\n" " ")$(cat /sys/class/net/eth0/mtu)"')
  [ "$out" = "$name-h$i $name-h$i eth0 lo 4000" ] || fail "host $i sees: $out"
done
[ "$(hostname)" != "$name-h0" ] || fail "hostname leaked to the machine"

# TCP from host 2 to host 0 across the bridge; a round trip shows the shaping (1 ms each way per link end).
server='import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.88.0.1", 18600)); s.listen(1); s.settimeout(20); c, _ = s.accept(); c.sendall(c.recv(5))'
client='import socket, time
for _ in range(100):
    try:
        c = socket.create_connection(("10.88.0.1", 18600), timeout=5); break
    except OSError: time.sleep(0.1)
t = time.monotonic(); c.sendall(b"hello"); assert c.recv(5) == b"hello"; print(f"{(time.monotonic() - t) * 1e3:.2f}")'
"$bed" exec --name "$name" 0 -- python3 -c "$server" &
rtt=$("$bed" exec --name "$name" 2 -- python3 -c "$client") || fail "no TCP connection from host 2 to host 0"
wait
echo "round trip across the bridge: $rtt ms"
if [ "$netem" = 1 ]; then
  python3 -c "import sys; sys.exit(0 if float('$rtt') >= 3.5 else 1)" || fail "netem delay not applied (rtt $rtt ms)"
  "$bed" exec --name "$name" 0 -- tc qdisc show dev eth0 | grep -q "netem" || fail "no netem qdisc on eth0"
else
  "$bed" exec --name "$name" 0 -- tc qdisc show dev eth0 | grep -q "tbf.*rate 10Gbit" || fail "no tbf qdisc on eth0"
fi

# run: a failing command still tears everything down and its status comes back.
set +e
"$bed" run --name "$name" -- "true" ::: "exit 3"
rc=$?
set -e
[ "$rc" = 3 ] || fail "run returned $rc for a command that exited 3"
left=$(ip netns list | grep -c "^$name-" || true)
[ "$left" = 0 ] || fail "$left namespace(s) left after run"
echo "testbed selftest: ok"
