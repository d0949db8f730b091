#!/usr/bin/env python3
"""Summarises net_proof.sh logs: median of the runs per (test, size), ICN vs Socket, as Markdown.
Exit status 1 (reasons on stderr as FAIL lines) when a result row counted wrong elements (out-of-place or in-place
#wrong), when there are no result rows, or when a (test, size) was measured for one transport only."""
import glob, os, re, statistics, sys
from collections import defaultdict

d = sys.argv[1]
# (test, transport, size) -> [(time_us, busbw)] using the out-of-place columns of nccl-tests
rows = defaultdict(list)
wrong = 0
failures = []
for path in glob.glob(os.path.join(d, "*_r*.log")):
    name = os.path.basename(path)[:-4]
    m = re.match(r"(icn|socket)_(\w+?_perf)_r\d+", name)
    if not m:
        continue
    tr, test = m.groups()
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 12 and f[0].isdigit() and re.match(r"^[\d.]+$", f[5] or ""):
            try:
                t_us, busbw, err = float(f[5]), float(f[7]), f[8]
            except ValueError:
                continue
            for e in (err, f[12] if len(f) >= 13 else "0"):
                if e not in ("0", "N/A"):
                    wrong += 1
                    failures.append(f"{name}: {e} wrong elements at {f[0]} B")
            rows[(test, tr, int(f[0]))].append((t_us, busbw))
tests = sorted({k[0] for k in rows})
print(f"data-check failures (#wrong != 0): {wrong}\n")
for test in tests:
    print(f"### {test} (median of runs; out-of-place)\n")
    print("| size | ICN time µs | Socket time µs | ICN busbw GB/s | Socket busbw GB/s | busbw ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sorted({k[2] for k in rows if k[0] == test}):
        a, b = rows.get((test, "icn", size)), rows.get((test, "socket", size))
        if not a or not b:
            continue
        ta, tb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
        ba, bb = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
        ratio = f"{ba / bb:.2f}x" if bb > 0 else "-"
        print(f"| {size} | {ta:.1f} | {tb:.1f} | {ba:.2f} | {bb:.2f} | {ratio} |")
    print()
if not rows:
    failures.append(f"no nccl-tests result rows in {d}/*_r*.log")
for test, tr, size in sorted(rows):
    other = "socket" if tr == "icn" else "icn"
    if (test, other, size) not in rows:
        failures.append(f"{test} {size} B: measured with {tr} only, no {other} result")
for f in failures:
    print(f"FAIL {f}", file=sys.stderr)
sys.exit(1 if failures else 0)
