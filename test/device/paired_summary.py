#!/usr/bin/env python3
"""Summarises test/device/paired_proof.sh. Per process and size, the best fixed NCCL_ALGO x NCCL_PROTO choice is
the one with the lowest median; each configuration's ratio to it is the median over rounds of the two times
measured in the same round (neighbours in time: the machine's latency mode drifts within a process too); over
processes, the median of those ratios. The online ratio also gets a 90% interval: rounds resampled with
replacement inside each process (pairs kept together), the same medians taken, 1000 times; a size is a clear miss
only when the whole interval lies above the target, otherwise the runs cannot tell it from the target.

    paired_summary.py <dir with paired-<path>-p<k>.json> [--plot out.png]

Exit status 1 (reasons on stderr as FAIL lines) when there is no result file, or a process lacks a configuration
(default, the six fixed choices, online) or has no samples for a size its default configuration measured.
"""
import json
import math
import os
import random
import re
import statistics
import sys
from collections import defaultdict

from small_png import save_png

FIXED = [f"{a}-{p}" for a in ("Tree", "Ring") for p in ("LL", "LL128", "Simple")]
SHOWN = ["default", "online", "static"]
TARGET = 1.03
BOOTSTRAP = 1000


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def load(directory, failures):
    """{path: [ {config: {size: [us per round]}} per process ]}; what is missing goes to failures."""
    runs = defaultdict(list)
    for name in sorted(os.listdir(directory)):
        m = re.match(r"^paired-(\w+)-p(\d+)\.json$", name)
        if not m:
            continue
        with open(os.path.join(directory, name)) as f:
            doc = json.load(f)
        proc = {c["name"]: {int(s): v for s, v in c["us"].items() if v} for c in doc["configs"]}
        sizes = set(proc.get("default", {}))
        for c in ["default"] + FIXED + ["online"]:
            if c not in proc:
                failures.append(f"{name}: no {c} configuration")
        for c, got in proc.items():
            if not got or sizes - set(got):
                failures.append(f"{name}: {c} has no samples at {len(sizes - set(got)) if got else 'any'} size(s)")
        runs[m.group(1)].append(proc)
    return runs


def plot(series, out):
    """series: {path: {config: [(size, ratio)]}} -> one panel per path (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        print(f"no matplotlib: {out} not drawn", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(series), figsize=(6 * len(series), 4), squeeze=False)
    for ax, (path, cfgs) in zip(axes[0], sorted(series.items(), key=lambda kv: (kv[0] != "nvl", kv[0]))):
        for c, pts in cfgs.items():
            if pts:
                ax.plot([s for s, _ in pts], [r for _, r in pts], marker="o", label=c)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.axhline(TARGET, color="red", lw=0.8, ls="--", label=f"{TARGET}x")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("all_reduce size (bytes)")
        ax.set_ylabel("time / best fixed choice (same round)")
        ax.set_title(f"{path}: inside one process")
        ax.legend()
    fig.tight_layout()
    save_png(fig, out)


def summarise(path, procs, series=None):
    sizes = sorted({s for p in procs for s in p.get("default", {})})
    ratios = {c: defaultdict(list) for c in SHOWN}
    best_names = defaultdict(list)
    times = {c: defaultdict(list) for c in SHOWN + ["best"]}
    speedups = {c: defaultdict(list) for c in ("online", "static")}
    def paired(a, b):  # median over rounds of a[r] / b[r]
        return statistics.median(x / y for x, y in zip(a, b))

    # Per size, per process: online's per-round ratios to that process's best fixed choice (for the interval).
    online_rounds = defaultdict(list)

    for p in procs:
        for s in sizes:
            fixed = [(statistics.median(p[c][s]), c) for c in FIXED if c in p and s in p[c]]
            if not fixed:
                continue
            best, name = min(fixed)
            best_names[s].append(name)
            times["best"][s].append(best)
            for c in SHOWN:
                if c in p and s in p[c]:
                    ratios[c][s].append(paired(p[c][s], p[name][s]))
                    if c == "online":
                        online_rounds[s].append([x / y for x, y in zip(p[c][s], p[name][s])])
                    times[c][s].append(statistics.median(p[c][s]))
            for c in speedups:
                if c in p and s in p[c] and s in p.get("default", {}):
                    speedups[c][s].append(paired(p["default"][s], p[c][s]))
    lines = [f"## {path}: {len(procs)} processes; time / the best fixed choice's time in the same round, median over "
             "rounds, then over processes", "",
             "| size | best fixed (us) | default/best | online/best | static/best | online (us) | online/best 90% |",
             "|---:|---|---:|---:|---:|---:|---|"]
    rng = random.Random(1)  # the same table every time for the same data
    clear_misses = []
    within = {c: 0 for c in ("online", "static")}
    counted = {c: 0 for c in ("online", "static")}
    for s in sizes:
        if not best_names[s]:
            continue
        name = max(sorted(set(best_names[s])), key=best_names[s].count)  # ties: the same name every run
        cells = []
        for c in SHOWN:
            if ratios[c][s]:
                r = statistics.median(ratios[c][s])
                flag = " !" if c != "default" and r > TARGET else ""
                cells.append(f"{r:.3f}{flag}")
                if c in within:
                    counted[c] += 1
                    within[c] += r <= TARGET
            else:
                cells.append("-")
        if series is not None:
            for c in SHOWN:
                if ratios[c][s]:
                    series.setdefault(path, {}).setdefault(c, []).append((s, statistics.median(ratios[c][s])))
        online_us = f"{statistics.median(times['online'][s]):.1f}" if times["online"][s] else "-"
        interval = "-"
        if online_rounds[s]:
            lo, hi = bootstrap_interval(online_rounds[s], rng)
            interval = f"{lo:.3f}-{hi:.3f}"
            if lo > TARGET:
                clear_misses.append(fmt_size(s))
        lines.append(f"| {fmt_size(s)} | {statistics.median(times['best'][s]):.1f} ({name}) | " + " | ".join(cells) +
                     f" | {online_us} | {interval} |")
    lines.append("")
    for c in ("online", "static"):
        per_size = [statistics.median(speedups[c][s]) for s in sizes if speedups[c][s]]
        if per_size:
            geo = math.exp(sum(math.log(x) for x in per_size) / len(per_size))
            lines.append(f"ICN {c}: within {TARGET}x of the best fixed choice at {within[c]}/{counted[c]} sizes; "
                         f"geomean speed-up over NCCL's default {geo:.3f}x.")
    if counted["online"]:
        lines.append(f"ICN online: clearly beyond {TARGET}x (the whole 90% interval above it) at {len(clear_misses)}/"
                     f"{counted['online']} sizes{': ' + ', '.join(clear_misses) if clear_misses else ''}.")
    lines.append("")
    return lines


def bootstrap_interval(per_process, rng):
    """90% interval of the median over processes of the median over rounds, rounds resampled in each process."""
    stats = []
    for _ in range(BOOTSTRAP):
        meds = [statistics.median(rng.choices(r, k=len(r))) for r in per_process if r]
        stats.append(statistics.median(meds))
    stats.sort()
    return stats[int(0.05 * (len(stats) - 1))], stats[int(0.95 * (len(stats) - 1))]


def main():
    args = sys.argv[1:]
    plot_to = None
    if "--plot" in args:
        i = args.index("--plot")
        if i + 1 >= len(args):
            sys.exit(__doc__)
        plot_to = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    failures = []
    runs = load(args[0], failures)
    if not runs:
        sys.exit(f"FAIL no paired-<path>-p<k>.json in {args[0]}")
    out = ["# Tuner proof inside one process (test/device/paired_proof.sh)", ""]
    series = {}
    for path in sorted(runs, key=lambda p: (p != "nvl", p)):
        out += summarise(path, runs[path], series)
    print("\n".join(out))
    if plot_to:
        plot(series, plot_to)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
