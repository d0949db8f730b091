#!/usr/bin/env bash
# Runs a two-rank suite (conformance, reliability: anything built on test/pair) with its ranks on two
# emulated hosts (tools/testbed/icn-testbed), then proves from the ranks' logs that every connection
# crossed the link between them: each connection's INFO line names a peer on the other host and only
# allowed lanes (UCX: ALLOWED_LANES, a regex per lane, default tcp over eth0; verbs: the ib transport),
# and no same-host path appears.
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

python3 - "$log" "$name" "$allowed" <<'PY'
import re, sys
log, name, allowed = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
conn = re.compile(r"rank (\d) \(pid \d+\): .*ICN (?:UCX|ib|TCP) (?:send|receive) connection (?:to|from) (\S+?):\d+ .*")
lanes_re = re.compile(r"ready, lanes (.*)$")
seen, bad = 0, []
for line in open(log, errors="replace"):
    if "same-host fast path" in line:
        bad.append("same-host path: " + line.strip())
    m = conn.search(line)
    if not m:
        continue
    seen += 1
    rank, peer_host = int(m.group(1)), m.group(2)
    want = f"{name}-h{1 - rank}"
    if peer_host != want:
        bad.append(f"rank {rank} connected to host {peer_host}, expected {want}: {line.strip()}")
    lm = lanes_re.search(line)
    if lm:
        for lane in [x.strip() for x in lm.group(1).split(",")]:
            if not allowed.search(lane):
                bad.append(f"lane {lane!r} not allowed across hosts: {line.strip()}")
print(f"cross_host: {seen} connection(s) checked, {len(bad)} problem(s)")
for b in bad[:20]:
    print("  " + b)
sys.exit(1 if bad or seen == 0 else 0)
PY
