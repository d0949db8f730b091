#!/usr/bin/env python3
"""Markdown tables from cluster_proof.sh's results (CLUSTER lines).

Compare mode (one configuration per process group): per node count, link rate, collective and size, the median
over rounds of each configuration's time, the best NCCL Socket setting, and ICN's ratio (best Socket time / ICN's
time: above 1 means ICN is faster). Tuner mode (several configurations in one process group: NCCL's default, the
fixed algorithm x protocol choices, the online tuner): the online tuner against the best fixed choice and against
NCCL's default. Raw TCP capacity (iperf3) per node count heads each section.
Exit status 1 (FAIL lines on stderr) when any rank counted wrong elements or the results hold no measurement.
"""
import json
import statistics
import sys
from collections import defaultdict


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def load(path):
    recs = []
    for line in open(path, errors="replace"):
        if line.startswith("CLUSTER "):
            try:
                recs.append(json.loads(line[len("CLUSTER "):]))
            except json.JSONDecodeError:
                print("summary: skipped a malformed line: " + line.strip()[:120], file=sys.stderr)
    return recs


def section_key(r):
    label = r.get("label", "")
    rate = r.get("rate") or (label.split("@", 1)[1] if "@" in label else "")
    return r["nranks"], rate or "unshaped"


def compare_rows(times, configs):
    """times[(op, bytes)][config] -> list of us; one Markdown table per op."""
    out = []
    socket = [c for c in configs if c.startswith("socket")]
    mine = [c for c in configs if not c.startswith("socket")]
    for op in dict.fromkeys(op for op, _ in times):
        out.append(f"\n#### {op} (median over rounds, us)\n")
        out.append("| size | " + " | ".join(configs) + " | best Socket | " +
                   " | ".join(f"{c} vs best Socket" for c in mine) + " |")
        out.append("|---" * (2 + len(configs) + len(mine)) + "|")
        for (o, size) in sorted(k for k in times if k[0] == op):
            med = {c: statistics.median(v) for c, v in times[(o, size)].items()}
            best = min(socket, key=lambda c: med.get(c, float("inf")), default=None)
            cells = [f"{med[c]:.1f}" if c in med else "-" for c in configs]
            ratios = []
            for c in mine:
                if best in med and c in med:
                    x = med[best] / med[c]
                    ratios.append(f"**{x:.2f}x**" if x < 1.0 else f"{x:.2f}x")
                else:
                    ratios.append("-")
            out.append(f"| {human(size)} | " + " | ".join(cells) + f" | {best or '-'} | " + " | ".join(ratios) + " |")
    return out


def tuner_rows(times, configs):
    out = []
    fixed = [c for c in configs if c not in ("default", "online")]
    for op in dict.fromkeys(op for op, _ in times):
        out.append(f"\n#### {op} tuner (median over rounds, us; ratios: time / online's time)\n")
        out.append("| size | " + " | ".join(configs) + " | best fixed | online vs best fixed | online vs default |")
        out.append("|---" * (4 + len(configs)) + "|")
        for (o, size) in sorted(k for k in times if k[0] == op):
            med = {c: statistics.median(v) for c, v in times[(o, size)].items()}
            best = min(fixed, key=lambda c: med.get(c, float("inf")), default=None)
            cells = [f"{med[c]:.1f}" if c in med else "-" for c in configs]
            on = med.get("online")
            vb = f"{med[best] / on:.2f}x" if on and best in med else "-"
            vd = f"{med['default'] / on:.2f}x" if on and "default" in med else "-"
            out.append(f"| {human(size)} | " + " | ".join(cells) + f" | {best or '-'} | {vb} | {vd} |")
    return out


def plot(times, configs, path):
    """ICN's time against the best Socket setting's, per collective and size, one panel per node count."""
    try:
        import matplotlib
    except ImportError:
        print("summary: no matplotlib, no plot", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from small_png import save_png
    keys = sorted(k for k in times if "online" not in configs[k])
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4), sharey=True, squeeze=False)
    for ax, key in zip(axes[0], keys):
        ops = list(dict.fromkeys(op for op, _ in times[key]))
        for op in ops:
            xs, ys = [], []
            for (o, size) in sorted(k for k in times[key] if k[0] == op):
                med = {c: statistics.median(v) for c, v in times[key][(o, size)].items()}
                socket = [med[c] for c in med if c.startswith("socket")]
                mine = [med[c] for c in med if not c.startswith("socket")]
                if socket and mine:
                    xs.append(size)
                    ys.append(min(socket) / mine[0])
            ax.plot(xs, ys, marker="o", label=op)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{key[0]} nodes, {key[1]}")
        ax.set_xlabel("bytes")
    axes[0][0].set_ylabel("best Socket time / ICN time")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path)


def main(path, plot_path=None):
    recs = load(path)
    fails = [f"{r.get('label')} rank {r.get('rank')} {r.get('config')} {r.get('op')} {r.get('bytes')}: "
             f"{r['wrong']} wrong elements" for r in recs if r.get("wrong")]
    iperf = defaultdict(dict)
    times = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    configs = defaultdict(list)
    for r in recs:
        if r.get("label") == "iperf3":
            iperf[section_key(r)][r["streams"]] = r["gbs"]
        elif "us" in r:
            key = section_key(r)
            times[key][(r["op"], r["bytes"])][r["config"]].append(r["us"])
            if r["config"] not in configs[key]:
                configs[key].append(r["config"])
    if not times:
        fails.append("no measurements in " + path)
    out = []
    for key in sorted(times, key=lambda k: (k[0], k[1])):
        nodes, rate = key
        out.append(f"\n### {nodes} nodes, links {rate}\n")
        if key in iperf:
            out.append("Raw TCP capacity host 1 -> host 0 (iperf3): " +
                       ", ".join(f"{s} stream(s) {g:.2f} GB/s" for s, g in sorted(iperf[key].items())))
        tuner = "online" in configs[key]
        out += (tuner_rows if tuner else compare_rows)(times[key], configs[key])
    print("\n".join(out))
    if plot_path and times:
        plot(times, configs, plot_path)
    for f in fails:
        print("FAIL summary: " + f, file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    plot_path = None
    if "--plot" in args:
        i = args.index("--plot")
        plot_path = args[i + 1]
        del args[i:i + 2]
    sys.exit(main(args[0], plot_path))
