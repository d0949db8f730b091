#!/usr/bin/env python3
"""Summarises tuner_proof.sh: median of the repetitions per size, ratio to the best fixed choice, geometric-mean
speed-up over NCCL's default; writes tuner_proof.md / .json and one plot per path into OUT."""
import json
import math
import os
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([0-9.]+)\s+\S+\s+\S+\s+\S+\s+([0-9.]+)")
FIXED = ["Tree-LL", "Tree-LL128", "Tree-Simple", "Ring-LL", "Ring-LL128", "Ring-Simple"]
TARGET = 1.03


def parse(path):
    """size -> out-of-place time (us). With several sweeps (-N 2) the last one wins: the first is warm-up."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                out[int(m.group(1))] = float(m.group(3))
    return out


def human(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def main():
    out_dir = sys.argv[1]
    discovery = sys.argv[2] if len(sys.argv) > 2 else "?"
    raw = os.path.join(out_dir, "raw")
    runs = defaultdict(lambda: defaultdict(list))  # (path, cfg) -> size -> [times]
    for name in sorted(os.listdir(raw)):
        m = re.match(r"^(nvl|net)-(.+)-r(\d+)\.txt$", name)
        if not m:
            continue
        for size, t in parse(os.path.join(raw, name)).items():
            runs[(m.group(1), m.group(2))][size].append(t)
    report = {"discovery": discovery, "target_ratio": TARGET, "paths": {}}
    md = [f"# ICN tuner proof\n\nTuner discovery: {discovery}\n"]
    for path in ["nvl", "net"]:
        sizes = sorted(runs.get((path, "default"), {}).keys())
        if not sizes:
            continue
        med = {cfg: {s: statistics.median(v) for s, v in runs[(path, cfg)].items() if v}
               for (p, cfg) in runs if p == path}
        rows = []
        for s in sizes:
            fixed = {c: med[c][s] for c in FIXED if c in med and s in med[c]}
            if not fixed or s not in med.get("default", {}):
                continue
            best_cfg = min(fixed, key=fixed.get)
            row = {"size": s, "default": med["default"][s], "best_fixed": fixed[best_cfg], "best_cfg": best_cfg,
                   "fixed": fixed, "reps": len(runs[(path, "default")][s])}
            for c in ["online", "static"]:
                if c in med and s in med[c]:
                    row[c] = med[c][s]
                    row[c + "_vs_best"] = med[c][s] / fixed[best_cfg]
            row["default_vs_best"] = med["default"][s] / fixed[best_cfg]
            rows.append(row)
        summary = {}
        for c in ["online", "static"]:
            ok = [r for r in rows if c in r]
            if ok:
                summary[c] = {
                    "geomean_speedup_over_default": math.exp(sum(math.log(r["default"] / r[c]) for r in ok) / len(ok)),
                    "sizes_within_target": sum(1 for r in ok if r[c + "_vs_best"] <= TARGET),
                    "sizes": len(ok),
                    "worst_vs_best": max(r[c + "_vs_best"] for r in ok),
                }
        summary["default"] = {"geomean_vs_best": math.exp(sum(math.log(r["default_vs_best"]) for r in rows) / len(rows))}
        report["paths"][path] = {"rows": rows, "summary": summary}
        title = "NVLink path" if path == "nvl" else "Net path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)"
        md.append(f"\n## {title}\n\nall_reduce_perf -g 2, out-of-place time in us, median of {rows[0]['reps'] if rows else 0} runs\n")
        md.append("| size | default | best fixed | ICN online | ICN static | default/best | online/best | static/best |")
        md.append("|---:|---:|---|---:|---:|---:|---:|---:|")
        for r in rows:
            def cell(c):
                return f"{r[c]:.1f}" if c in r else "-"
            def ratio(c):
                k = c + "_vs_best"
                if k not in r:
                    return "-"
                mark = "" if r[k] <= TARGET else " !"
                return f"{r[k]:.3f}{mark}"
            md.append(f"| {human(r['size'])} | {r['default']:.1f} | {r['best_fixed']:.1f} ({r['best_cfg']}) | "
                      f"{cell('online')} | {cell('static')} | {r['default_vs_best']:.3f} | {ratio('online')} | "
                      f"{ratio('static')} |")
        for c in ["online", "static"]:
            if c in summary:
                s = summary[c]
                md.append(f"\nICN {c}: geomean speed-up over NCCL default {s['geomean_speedup_over_default']:.3f}x; "
                          f"{s['sizes_within_target']}/{s['sizes']} sizes within {TARGET}x of the best fixed choice "
                          f"(worst {s['worst_vs_best']:.3f}x).")
        plot(out_dir, path, title, rows)
    with open(os.path.join(out_dir, "tuner_proof.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, "tuner_proof.md"), "w") as f:
        f.write(text)
    print(text)


def plot(out_dir, path, title, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    if not rows:
        return
    xs = [r["size"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for c in FIXED:
        ys = [r["fixed"].get(c) for r in rows]
        ax1.plot(xs, ys, lw=0.8, alpha=0.5, label=c)
    ax1.plot(xs, [r["default"] for r in rows], "k--", lw=1.5, label="NCCL default")
    for c, style in [("online", "r-o"), ("static", "b-s")]:
        pts = [(r["size"], r[c]) for r in rows if c in r]
        if pts:
            ax1.plot(*zip(*pts), style, ms=3, lw=1.5, label=f"ICN {c}")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_ylabel("time (us)")
    ax1.set_title(f"all_reduce, 2 GPUs: {title}")
    ax1.legend(fontsize=7, ncol=2)
    ax2.axhline(1.0, color="gray", lw=0.8)
    ax2.axhline(TARGET, color="gray", lw=0.8, ls=":")
    ax2.plot(xs, [r["default_vs_best"] for r in rows], "k--", label="NCCL default")
    for c, style in [("online", "r-o"), ("static", "b-s")]:
        pts = [(r["size"], r[c + "_vs_best"]) for r in rows if c in r]
        if pts:
            ax2.plot(*zip(*pts), style, ms=3, label=f"ICN {c}")
    ax2.set_ylabel("time / best fixed")
    ax2.set_xlabel("message size (bytes)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, f"tuner_proof_{path}.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
