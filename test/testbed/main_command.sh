#!/usr/bin/env bash
# The README's main command, shortened: icn-perf with both ranks on this host (it forks), or rank 0 and rank 1 on
# two emulated hosts (tools/testbed/icn-testbed). Fails when icn-perf exits non-zero, logs a WARN, leaves out a
# size or reports a zero, or when its log does not show one send connection per rank over the expected transport
# (ICN_TRANSPORT when set) - across hosts, each to the other host.
#   main_command.sh one-host ICN_PERF [ICN_PERF_ARGS...]
#   main_command.sh cross-host ICN_PERF BED [ICN_PERF_ARGS...]
set -uo pipefail
mode=$1 perf=$2
shift 2
bed=""
if [ "$mode" = cross-host ]; then bed=$1; shift; fi
args=("$@")
out=$(mktemp /tmp/icn-main-command.XXXXXX)
trap 'rm -f "$out"' EXIT
export NCCL_DEBUG=INFO

case "$mode" in
  one-host) "$perf" "${args[@]}" > "$out" 2>&1 ;;
  cross-host)
    "$bed" run --name icnmain -- "$perf --server --port 18515 ${args[*]}" \
      ::: "$perf --client 10.88.0.1:18515 ${args[*]}" > "$out" 2>&1 ;;
  *) echo "usage: main_command.sh one-host|cross-host ICN_PERF [BED] [ARGS...]" >&2; exit 2 ;;
esac
rc=$?
grep -v "ICN param " "$out" | grep -vE "INFO ICN (TCP|UCX|ib) (device|transport)" | tail -n 40
[ "$rc" = 77 ] && exit 77  # the test bed cannot make hosts here (not root)
fail() { echo "main-command ($mode): FAIL: $*"; exit 1; }
[ "$rc" = 0 ] || fail "icn-perf exited with $rc"
if grep -q "WARN" "$out"; then fail "a WARN in the log: $(grep -m1 WARN "$out")"; fi

python3 - "$out" "$mode" "${ICN_TRANSPORT:-}" "${args[@]}" <<'PY' || exit 1
import re, sys
log, mode, want = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
def size(s):
    m = re.fullmatch(r"([0-9.]+)([KMG]?)", s)
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])
lo, hi = 8, 64 << 20
for i, a in enumerate(args):
    if a == "--min": lo = size(args[i + 1])
    if a == "--max": hi = size(args[i + 1])
expected = []
b = lo
while b <= hi:
    expected.append(b)
    b *= 2
text = open(log, errors="replace").read()
rows = {}
for line in text.splitlines():
    f = line.split()
    if len(f) == 5 and f[0].isdigit():
        rows[int(f[0])] = [float(x) for x in f[1:]]
problems = []
for b in expected:
    if b not in rows:
        problems.append(f"no result for {b} bytes")
    elif min(rows[b][:2]) <= 0:
        problems.append(f"{b} bytes: bandwidth {rows[b][0]} GB/s, latency {rows[b][1]} us")
conn = re.findall(r"INFO ICN (TCP|UCX|ib) send connection to (\S+?):\d+ .*ready", text)
if len(conn) != 2:
    problems.append(f"{len(conn)} send connection(s) ready in the log, expected one per rank")
if want in ("tcp", "ucx", "ib") and any(t.lower() != want for t, _ in conn):
    problems.append(f"ICN_TRANSPORT={want} but the connections used {sorted(set(t for t, _ in conn))}")
if mode == "cross-host":
    peers = sorted(p for _, p in conn)
    if peers != ["icnmain-h0", "icnmain-h1"]:
        problems.append(f"send connections went to {peers}, expected one to each emulated host")
for p in problems:
    print(f"main-command ({mode}): FAIL: {p}")
if problems:
    sys.exit(1)
print(f"main-command ({mode}): {len(expected)} sizes, connections {conn}")
PY
