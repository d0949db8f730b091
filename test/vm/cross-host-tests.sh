# Two hosts for real (run-vm.sh --guests 2): this script runs in both guests, each its own kernel with one rxe
# device (rxe0) on its virtio NIC (eth0), the NICs joined by a link outside both. Guest a (icnvm-a) is rank 0,
# guest b (icnvm-b) rank 1. Steps run in the same order in both guests; each step is one process per guest
# (the listening side in one, the connecting side in the other, retried while the listener is not up yet).
# Each guest reports its own side of every step, and proves from its own rank's log that each connection
# went to the other host over the expected path: verbs on rxe0, UCX rc/ud verbs on rxe0:1 and UCX tcp on eth0
# (never UCX's shared-memory transports), ICN's TCP transport.
# Reported (guest a): ib_write_bw and ICN verbs bandwidth at 1 MiB between the two rxe devices, same
# direction and byte count, interleaved rounds, median ratio (not gated: the emulator shares 2 host cores).
me=$ICN_VM_ROLE
peer=$ICN_VM_PEER
if [ "$me" = a ]; then other=icnvm-b; rank=0; else other=icnvm-a; rank=1; fi
export ICN_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO ICN_LOG_DETAIL=1 UCX_WARN_UNUSED_ENV_VARS=n
plugin=/opt/icn/lib/libnccl-net-icn.so
gid=$(ipv4_gid_index)
port=18700

# xstep NAME TIMEOUT LISTENER_ROLE "LISTENER CMD" "CONNECTOR CMD": this guest's side of one step, output in
# /tmp/NAME.log. The connector is retried (for at most TIMEOUT) while its log says the listener is not up.
xstep() {
  name=$1; t=$2; lrole=$3; lcmd=$4; ccmd=$5
  port=$((port + 1))
  export port  # the commands name it as \$port
  if [ "$me" = "$lrole" ]; then
    timeout "$t" sh -c "$lcmd" > "/tmp/$name.log" 2>&1; rc=$?
  else
    end=$(($(date +%s) + t))
    while :; do
      timeout "$t" sh -c "$ccmd" > "/tmp/$name.log" 2>&1; rc=$?
      [ $rc = 0 ] && break
      grep -qE "Couldn't connect|Connection refused|bootstrap connection failed|Unable to open" "/tmp/$name.log" || break
      [ "$(date +%s)" -lt "$end" ] || break
      sleep 1
    done
  fi
  if [ $rc = 0 ]; then pass "$name@$me"; else tail -n 40 "/tmp/$name.log"; fail "$name@$me rc=$rc"; fi
}

# path_check NAME REGEX [LOG]: this rank's log of step NAME (or LOG) has a connection line to the other host
# matching REGEX, and every connection line does.
path_check() {
  log=${3:-/tmp/$1.log}
  conns=$(grep -cE "ICN (ib|UCX|TCP) (send|receive) connection (to|from) " "$log")
  good=$(grep -E "ICN (ib|UCX|TCP) (send|receive) connection (to|from) $other:[0-9]+ " "$log" | grep -cE "$2")
  if [ "$good" -ge 1 ] && [ "$good" = "$conns" ]; then
    pass "$1-path@$me $(grep -oE "ICN (ib|UCX|TCP) send connection .*" "$log" | head -n 1)"
  else
    grep -E "ICN .*connection|lanes|WARN" "$log" | head -n 20
    fail "$1-path@$me ($good of $conns connection(s) to $other match '$2')"
  fi
}

# xconformance NAME FILTER ENV=VALUE...: the conformance suite, rank 0 of every pair here in a and rank 1 in
# b (test/pair's ICN_PAIR_RANK / ICN_PAIR_PEER); each guest reports its own process. The path proof reads
# this guest's rank only (each process also replays the peer's log).
xconformance() {
  name=$1; filter=$2; shift 2
  port=$((port + 1))
  if [ "$me" = a ]; then where=":$port"; else where="$peer:$port"; fi
  if ICN_PAIR_RANK=$rank ICN_PAIR_PEER=$where ICN_PLUGIN_PATH=$plugin timeout 500 env "$@" \
       icn-conformance "--gtest_filter=$filter" > "/tmp/$name.log" 2>&1; then rc=0; else rc=$?; fi
  grep -E '^\[ *(OK|FAILED) ' "/tmp/$name.log" | sed "s|^|$name@$me: |"
  if [ $rc = 0 ]; then pass "$name@$me"
  else
    grep -E -A4 'Failure$' "/tmp/$name.log" | head -n 60
    grep -E 'WARN' "/tmp/$name.log" | sort | uniq -c | sort -rn | head -n 20
    fail "$name@$me rc=$rc"
  fi
  grep "^  rank $rank (pid" "/tmp/$name.log" > "/tmp/$name.own.log"
}

perf_col() { awk -v c="$2" '$1 ~ /^[0-9]+$/ && NF >= c {v=$c} END {print v}' "$1"; }
ratio() {
  case "$1$2" in *[!0-9.]*|"") return ;; esac
  awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a > 0) printf "%.3f", a / b }'
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }
perf() { echo "icn-perf --plugin $plugin $*"; }

# The link itself: jumbo frames both ways (rxe sends 4 KiB path-MTU packets).
i=0
until ping -c 1 -W 1 -s 8000 "$peer" > /tmp/ping.log 2>&1 || [ $i -ge 120 ]; do i=$((i + 1)); done
if [ $i -lt 120 ]; then pass "link@$me $peer reachable, 8000-byte ping"; else cat /tmp/ping.log; fail "link@$me"; fi

# Verbs between the two rxe devices without ICN: RC ping-pong.
xstep rc-pingpong 90 b "ibv_rc_pingpong -d rxe0 -g $gid -n 20 -p \$port" \
  "ibv_rc_pingpong -d rxe0 -g $gid -n 20 -p \$port $peer"

# Every message through the emulated link costs milliseconds (two TCG guests and a qemu socket link on a shared
# host), so each size moves 64 messages (icn-perf's minimum) and latency takes 10 round trips.
sweep="--min 8 --max 256K --lat-iters 10 --bw-bytes 512"

# ICN verbs, rank 0 (a) sends: sizes 8 B to 256 KiB, bandwidth and latency.
xstep icn-perf-ib 240 a "ICN_TRANSPORT=ib $(perf --server --port \$port $sweep)" \
  "ICN_TRANSPORT=ib $(perf --client $peer:\$port $sweep)"
path_check icn-perf-ib " on rxe0: [0-9]+ QP"

# UCX over verbs (rc, ud for wire-up) and over TCP: the lanes must be the network ones on this guest's NIC.
# UCX on the IPv4 GID (its automatic choice, index 1 here) never completes UD wire-up between the two rxe
# devices (Endpoint timeout, with traffic class 106 or 0), while ICN's verbs and perftest use that GID; on the
# link-local GID (index 0, RoCE v2 over IPv6) UD and RC work, so UCX runs there.
ucx_rc="ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux UCX_NET_DEVICES=rxe0:1 UCX_IB_GID_INDEX=0"
xstep icn-perf-ucx-rc 240 a "$ucx_rc $(perf --server --port \$port $sweep)" \
  "$ucx_rc $(perf --client $peer:\$port $sweep)"
path_check icn-perf-ucx-rc "ready, lanes (rc_verbs|ud_verbs)/rxe0:1(, (rc_verbs|ud_verbs)/rxe0:1)*\$"
xstep icn-perf-ucx-tcp 240 a "ICN_TRANSPORT=ucx UCX_TLS=tcp $(perf --server --port \$port $sweep)" \
  "ICN_TRANSPORT=ucx UCX_TLS=tcp $(perf --client $peer:\$port $sweep)"
path_check icn-perf-ucx-tcp "ready, lanes tcp/eth0\$"
# ICN's own TCP transport over the same link.
xstep icn-perf-tcp 240 a "ICN_TRANSPORT=tcp $(perf --server --port \$port $sweep)" \
  "ICN_TRANSPORT=tcp $(perf --client $peer:\$port $sweep)"
path_check icn-perf-tcp "ICN TCP .* ready: [0-9]+ lanes"
if [ "$me" = a ]; then
  for t in ib ucx-rc ucx-tcp tcp; do
    result "xhost_${t}_GBps_256K" "$(awk '$1 == 262144 {print $2}' /tmp/icn-perf-$t.log)"
    result "xhost_${t}_lat_p50_us_8" "$(awk '$1 == 8 {print $3}' /tmp/icn-perf-$t.log)"
  done
fi

# ib_write_bw (a writes to b) then ICN verbs (a sends to b), 64 x 1 MiB each, interleaved rounds. perftest
# gets ICN's QP timeout (ICN_IB_TIMEOUT 18, ~1 s): with its default (14, 67 ms) round trips of tens of ms
# here make rxe retransmit writes the peer already took, and the run fails with a remote invalid request.
ratios=""
for rep in 1 2 3; do
  xstep ib_write_bw-$rep 120 b "ib_write_bw -d rxe0 -x $gid -s 1048576 -n 64 -u 18 -F -p \$port" \
    "ib_write_bw -d rxe0 -x $gid -s 1048576 -n 64 -u 18 -F -p \$port $peer"
  xstep icn-bw-$rep 180 a \
    "ICN_TRANSPORT=ib $(perf --server --port \$port --min 1M --max 1M --bw-only --bw-bytes 64M)" \
    "ICN_TRANSPORT=ib $(perf --client $peer:\$port --min 1M --max 1M --bw-only --bw-bytes 64M)"
  if [ "$me" = a ]; then
    ref=$(perf_col "/tmp/ib_write_bw-$rep.log" 4)
    ours=$(awk '$1 == 1048576 {printf "%.2f", $2 * 1e9 / 1048576}' "/tmp/icn-bw-$rep.log")
    echo "perf: 1 MiB round $rep: ib_write_bw $ref MB/s, ICN verbs $ours MB/s"
    result "xhost_ib_write_bw_MBps_1M_$rep" "$ref"
    result "xhost_icn_ib_MBps_1M_$rep" "$ours"
    ratios="$ratios $(ratio "$ours" "$ref")"
  fi
done
if [ "$me" = a ]; then
  result xhost_bw_ratio_1M "$(echo "$ratios" | median)"
  result xhost_bw_ratios_1M "$(echo $ratios | tr ' ' ',')"
fi

# Byte-exact transfers, lifecycle and faults across the two hosts: the conformance suite over verbs, and its
# transfers over UCX rc/ud verbs and UCX tcp.
xconformance conformance-ib "*" ICN_TRANSPORT=ib ICN_CONF_LIFECYCLE_CYCLES=20
path_check conformance-ib " on rxe0: [0-9]+ QP" /tmp/conformance-ib.own.log
xconformance conformance-ucx-rc "Transfer.*" $ucx_rc
path_check conformance-ucx-rc "ready, lanes (rc_verbs|ud_verbs)/rxe0:1(, (rc_verbs|ud_verbs)/rxe0:1)*\$" \
  /tmp/conformance-ucx-rc.own.log
xconformance conformance-ucx-tcp "Transfer.*" ICN_TRANSPORT=ucx UCX_TLS=tcp
path_check conformance-ucx-tcp "ready, lanes tcp/eth0\$" /tmp/conformance-ucx-tcp.own.log
