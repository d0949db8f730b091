#!/usr/bin/env bash
# Runs a two-rank suite (conformance, reliability: anything built on test/pair) with its ranks on two
# emulated hosts (tools/testbed/icn-testbed), then proves from the ranks' logs that every connection
# crossed the link between them: each connection's INFO line names a peer on the other host and only
# allowed lanes (UCX: ALLOWED_LANES, a regex per lane, default tcp over eth0; verbs: the ib transport),
# and no same-host path appears. With CROSS_HOST_HOSTILE=1 (the adversary suite: rank 1 plays a hostile peer
# and announces "hostile connection from ADDR"), it also proves that the hostile traffic came over the link:
# every announced address is rank 1's host's, the victim (rank 0) WARNs about that address at least once, every
# other address a victim WARN names (besides its own listener's) is rank 1's host's, and a connection from the hostile peer's made-up host name
# counts when its line names that address.
#   cross_host.sh [--mtu M] [--rate R] [--delay D] [--loss L] -- SUITE [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bed="$here/../../tools/testbed/icn-testbed"
up_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do up_args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "usage: cross_host.sh [testbed options] -- SUITE [ARGS...]" >&2; exit 2; }
allowed=${ALLOWED_LANES:-'^tcp/eth0$'}

name="icnx$$"
log=$(mktemp /tmp/icn-cross-host.XXXXXX)
cleanup() { "$bed" down --name "$name"; rm -f "$log"; }
trap cleanup EXIT
"$bed" up --name "$name" --hosts 2 "${up_args[@]}"

export ICN_PAIR_RANK0_HOST="$name-h0" ICN_PAIR_RANK1_HOST="$name-h1"
export ICN_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO ICN_LOG_DETAIL=1 UCX_WARN_UNUSED_ENV_VARS=n
set +e
"$@" > "$log" 2>&1
rc=$?
set -e
grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|WARN' "$log" | head -n 200
if [ "$rc" != 0 ]; then
  [ -n "${CROSS_HOST_KEEP_LOG:-}" ] && cp "$log" "$CROSS_HOST_KEEP_LOG"
  echo "cross_host: suite failed (exit $rc)"
  exit "$rc"
fi

python3 - "$log" "$name" "$allowed" "${CROSS_HOST_HOSTILE:-0}" "$("$bed" addr --name "$name" 1)" <<'PY'
import re, sys
log, name, allowed = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
hostile, addr1 = sys.argv[4] == "1", sys.argv[5]
announced, victim_warns = set(), 0
ip_port = re.compile(r"(\d+\.\d+\.\d+\.\d+):\d+")
conn = re.compile(r"rank (\d) \(pid \d+\): .*ICN (?:UCX|ib|TCP) (?:send|receive) connection (?:to|from) (\S+?):\d+ .*")
lanes_re = re.compile(r"ready, lanes (.*)$")
seen, bad = 0, []
for line in open(log, errors="replace"):
    if "same-host fast path" in line:
        bad.append("same-host path: " + line.strip())
    if hostile:
        a = re.search(r"rank 1 \(pid \d+\): adversary: hostile connection from (\S+)", line)
        if a:
            announced.add(a.group(1))
        if re.search(r"rank 0 \(pid \d+\): .*WARN", line):
            ips = ip_port.findall(re.sub(r"listener \S+", "", line))  # the victim's own listener may be named
            victim_warns += addr1 in ips
            for ip in ips:
                if ip != addr1:
                    bad.append(f"victim WARN names {ip}, not the hostile host's {addr1}: {line.strip()}")
    m = conn.search(line)
    if not m:
        continue
    seen += 1
    rank, peer_host = int(m.group(1)), m.group(2)
    want = f"{name}-h{1 - rank}"
    if hostile and rank == 0 and peer_host == "rogue-peer" and f"({addr1}:" in line:
        pass
    elif peer_host != want:
        bad.append(f"rank {rank} connected to host {peer_host}, expected {want}: {line.strip()}")
    lm = lanes_re.search(line)
    if lm:
        for lane in [x.strip() for x in lm.group(1).split(",")]:
            if not allowed.search(lane):
                bad.append(f"lane {lane!r} not allowed across hosts: {line.strip()}")
if hostile:
    if announced != {addr1}:
        bad.append(f"hostile connections came from {sorted(announced)}, expected only {addr1} (rank 1's host)")
    if victim_warns == 0:
        bad.append(f"no victim WARN names the hostile host's address {addr1}")
    print(f"cross_host: hostile peer at {sorted(announced)}, {victim_warns} victim WARN line(s) name {addr1}")
print(f"cross_host: {seen} connection(s) checked, {len(bad)} problem(s)")
for b in bad[:20]:
    print("  " + b)
sys.exit(1 if bad or seen == 0 else 0)
PY
