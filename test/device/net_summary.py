#!/usr/bin/env python3
"""Summarises net_proof.sh logs: median of the runs per (test, size), ICN vs Socket, as Markdown."""
import glob, os, re, statistics, sys
from collections import defaultdict

d = sys.argv[1]
# (test, transport, size) -> [(time_us, busbw)] using the out-of-place columns of nccl-tests
rows = defaultdict(list)
wrong = 0
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
            if err not in ("0", "N/A"):
                wrong += 1
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
