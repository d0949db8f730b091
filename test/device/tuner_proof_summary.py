#!/usr/bin/env python3
"""Summarises tuner_proof.sh: median of the repetitions per size, ratio to the best fixed choice, geometric-mean
speed-up over NCCL's default; writes tuner_proof.md / .json and one plot per path into OUT. Exit status 1 (reasons on
stderr as FAIL lines) when a run log holds no result rows or there are no results at all."""
import json
import math
import os
import re
import statistics
import sys
from collections import defaultdict

from small_png import save_png

LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([0-9.]+)\s+\S+\s+\S+\s+\S+\s+([0-9.]+)")
FIXED = ["Tree-LL", "Tree-LL128", "Tree-Simple", "Ring-LL", "Ring-LL128", "Ring-Simple"]
TARGET = 1.03


def parse(path):
    """size -> out-of-place time (us). With several sweeps (-N 2) the last one wins: the first is warm-up."""
    out = {}
    with open(path, errors="replace") as f:
        text = f.read()
    # NCCL INFO lines (NCCL_DEBUG_SUBSYS=COLL in the online runs) can cut a result row in two: drop them
    # and glue the pieces back together.
    for host in set(re.findall(r"^([\w.-]+):\d+:\d+ \[\d+\] NCCL ", text, re.M)):
        text = re.sub(re.escape(host) + r":\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)[^\n]*\n", "", text)
    for line in text.splitlines():
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
    failures = []
    for name in sorted(os.listdir(raw)) if os.path.isdir(raw) else []:
        m = re.match(r"^(nvl|net)-(.+)-r(\d+)\.txt$", name)
        if not m:
            continue
        parsed = parse(os.path.join(raw, name))
        if not parsed:
            failures.append(f"raw/{name}: no result rows")
        for size, t in parsed.items():
            runs[(m.group(1), m.group(2))][size].append(t)
    if not runs:
        failures.append(f"no results in {raw}")
    report = {"discovery": discovery, "target_ratio": TARGET, "paths": {}}
    md = [f"# ICN tuner proof\n\nTuner discovery: {discovery}\n"]
    for path in ["nvl", "net"]:
        # Partial results (a subset of configurations, a run cut by the budget) still give a table: every
        # comparison is made only where both sides were measured.
        sizes = sorted({s for (p, cfg), v in runs.items() if p == path for s in v})
        if not sizes:
            continue
        med = {cfg: {s: statistics.median(v) for s, v in runs[(path, cfg)].items() if v}
               for (p, cfg) in runs if p == path}
        rows = []
        for s in sizes:
            fixed = {c: med[c][s] for c in FIXED if c in med and s in med[c]}
            row = {"size": s, "fixed": fixed,
                   "reps": max((len(runs[(path, c)].get(s, [])) for c in med), default=0)}
            if fixed:
                best_cfg = min(fixed, key=fixed.get)
                row["best_fixed"], row["best_cfg"] = fixed[best_cfg], best_cfg
            for c in ["default", "online", "static"]:
                if c in med and s in med[c]:
                    row[c] = med[c][s]
                    if "best_fixed" in row:
                        row[c + "_vs_best"] = med[c][s] / row["best_fixed"]
            rows.append(row)
        summary = {}
        for c in ["online", "static"]:
            ok = [r for r in rows if c in r]
            if not ok:
                continue
            summary[c] = {"sizes": len(ok)}
            vs_default = [r for r in ok if "default" in r]
            if vs_default:
                summary[c]["geomean_speedup_over_default"] = math.exp(
                    sum(math.log(r["default"] / r[c]) for r in vs_default) / len(vs_default))
            vs_best = [r for r in ok if c + "_vs_best" in r]
            if vs_best:
                summary[c]["sizes_within_target"] = sum(1 for r in vs_best if r[c + "_vs_best"] <= TARGET)
                summary[c]["sizes_compared"] = len(vs_best)
                summary[c]["worst_vs_best"] = max(r[c + "_vs_best"] for r in vs_best)
        with_best = [r for r in rows if "default_vs_best" in r]
        if with_best:
            summary["default"] = {"geomean_vs_best": math.exp(
                sum(math.log(r["default_vs_best"]) for r in with_best) / len(with_best))}
        report["paths"][path] = {"rows": rows, "summary": summary}
        title = "NVLink path" if path == "nvl" else "Net path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)"
        reps = max((r["reps"] for r in rows), default=0)
        md.append(f"\n## {title}\n\nall_reduce_perf -g 2, out-of-place time in us, median of {reps} runs "
                  f"(each run: the last of its sweeps)\n")
        md.append("| size | default | best fixed | ICN online | ICN static | default/best | online/best | static/best |")
        md.append("|---:|---:|---|---:|---:|---:|---:|---:|")
        for r in rows:
            def cell(c):
                return f"{r[c]:.1f}" if c in r else "-"
            def ratio(c):
                k = c + "_vs_best"
                if k not in r:
                    return "-"
                mark = "" if r[k] <= TARGET or c == "default" else " !"
                return f"{r[k]:.3f}{mark}"
            best = f"{r['best_fixed']:.1f} ({r['best_cfg']})" if "best_fixed" in r else "-"
            md.append(f"| {human(r['size'])} | {cell('default')} | {best} | "
                      f"{cell('online')} | {cell('static')} | {ratio('default')} | {ratio('online')} | "
                      f"{ratio('static')} |")
        for c in ["online", "static"]:
            if c in summary:
                s = summary[c]
                parts = []
                if "geomean_speedup_over_default" in s:
                    parts.append(f"geomean speed-up over NCCL default {s['geomean_speedup_over_default']:.3f}x")
                if "sizes_within_target" in s:
                    parts.append(f"{s['sizes_within_target']}/{s['sizes_compared']} sizes within {TARGET}x of the "
                                 f"best fixed choice (worst {s['worst_vs_best']:.3f}x)")
                md.append(f"\nICN {c}: " + ("; ".join(parts) if parts else "no comparison possible") + ".")
        plot(out_dir, path, title, rows)
    with open(os.path.join(out_dir, "tuner_proof.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, "tuner_proof.md"), "w") as f:
        f.write(text)
    print(text)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


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
        ys = [r["fixed"].get(c, float("nan")) for r in rows]
        if any(c in r["fixed"] for r in rows):
            ax1.plot(xs, ys, lw=0.8, alpha=0.5, label=c)
    pts = [(r["size"], r["default"]) for r in rows if "default" in r]
    if pts:
        ax1.plot(*zip(*pts), "k--", lw=1.5, label="NCCL default")
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
    for c, style in [("default", "k--"), ("online", "r-o"), ("static", "b-s")]:
        pts = [(r["size"], r[c + "_vs_best"]) for r in rows if c + "_vs_best" in r]
        if pts:
            ax2.plot(*zip(*pts), style, ms=3, label="NCCL default" if c == "default" else f"ICN {c}")
    ax2.set_ylabel("time / best fixed")
    ax2.set_xlabel("message size (bytes)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, os.path.join(out_dir, f"tuner_proof_{path}.png"))
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
