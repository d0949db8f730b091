#!/usr/bin/env python3
"""Markdown tables from xhost_proof.sh's results: per collective and size, the median over rounds of each
configuration's median time, bus bandwidth, its ratio to Socket's default and to the best Socket setting
in the same run, and wrong elements; then DDP step time, communicator init and destroy times.
Exit status 1 (reasons on stderr as FAIL lines) when any configuration counted wrong elements or unequal DDP
parameters, or when the results hold no measurement."""
import json
import statistics
import sys
from collections import defaultdict

from small_png import save_png


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def main(path):
    recs = [json.loads(l[len("XHOST "):]) for l in open(path) if l.startswith("XHOST ")]
    iperf = {r["streams"]: r["gbs"] for r in recs if r["label"] == "iperf3"}
    recs = [r for r in recs if r["label"] != "iperf3"]
    labels = list(dict.fromkeys(r["label"] for r in recs))
    socket = [l for l in labels if l.startswith("socket")]
    out = []
    if iperf:
        out.append("Raw TCP capacity of the link (iperf3, 5 s, one process per stream): " +
                   ", ".join(f"{p} stream(s) {g:.2f} GB/s" for p, g in sorted(iperf.items())) + "\n")
    coll = defaultdict(lambda: defaultdict(list))
    wrong = defaultdict(int)
    for r in recs:
        if "us" in r and r["rank"] == 0:
            coll[(r["op"], r["bytes"])][r["label"]].append(r["us"])
        if r.get("wrong"):
            wrong[r["label"]] += r["wrong"]
    ops = list(dict.fromkeys(op for op, _ in coll))
    for op in ops:
        out.append(f"### {op} (median of per-round medians, time in us / bus bandwidth in GB/s)\n")
        out.append("| size | " + " | ".join(labels) + " | best Socket | " +
                   " | ".join(f"{l} / best Socket" for l in labels if not l.startswith("socket")) + " |")
        out.append("|---" * (2 + len(labels) + len([l for l in labels if not l.startswith('socket')])) + "|")
        for (o, size) in sorted(k for k in coll if k[0] == op):
            row = coll[(o, size)]
            med = {l: statistics.median(v) for l, v in row.items()}
            bus = 2 * 1 / 2 if op == "all_reduce" else 1 / 2  # two ranks
            cells = [f"{med[l]:.1f} / {size * bus / med[l] / 1e3:.2f}" if l in med else "-" for l in labels]
            best = min((med[l] for l in socket if l in med), default=None)
            bestl = min((l for l in socket if l in med), key=lambda l: med[l], default="-")
            ratios = [f"{best / med[l]:.2f}x" if best and l in med else "-" for l in labels if not l.startswith("socket")]
            out.append(f"| {human(size)} | " + " | ".join(cells) + f" | {bestl} | " + " | ".join(ratios) + " |")
        out.append("\n(ratio = best Socket time / ICN time: above 1 means ICN is faster)\n")
    other = defaultdict(lambda: defaultdict(list))
    for r in recs:
        if r["op"] in ("init", "destroy") and r["rank"] == 0:
            other[r["op"]][r["label"]].append(r["s"] * 1e3)
        if r["op"] == "ddp_step" and r["rank"] == 0:
            other["ddp step (ms)"][r["label"]].append(r["ms"])
            if not r["params_equal"]:
                wrong[r["label"]] += 1
    if other:
        out.append("| measure (median over rounds, ms) | " + " | ".join(labels) + " |")
        out.append("|---" * (1 + len(labels)) + "|")
        for k, row in other.items():
            out.append(f"| {k} | " + " | ".join(f"{statistics.median(row[l]):.1f}" if l in row else "-" for l in labels) + " |")
    out.append("\nWrong elements (data checks before and after timing; DDP parameters compared across ranks): " +
               (", ".join(f"{l}: {n}" for l, n in wrong.items()) if wrong else "0 in every configuration"))
    print("\n".join(out))
    failures = [f"{l}: {n} wrong elements" for l, n in wrong.items()]
    if not recs:
        failures.append(f"no measurements (XHOST lines) in {path}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


def plot(path, png):
    """One panel per collective: bus bandwidth per size and configuration (median over rounds)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recs = [json.loads(l[len("XHOST "):]) for l in open(path) if l.startswith("XHOST ")]
    recs = [r for r in recs if r["label"] != "iperf3" and "us" in r and r["rank"] == 0]
    ops = list(dict.fromkeys(r["op"] for r in recs))
    fig, axes = plt.subplots(1, len(ops), figsize=(6 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops):
        by = defaultdict(lambda: defaultdict(list))
        for r in recs:
            if r["op"] == op and r["bytes"] >= 1 << 20:
                by[r["label"]][r["bytes"]].append(r["busbw_gbs"])
        for label, sizes in by.items():
            xs = sorted(sizes)
            ax.plot(xs, [statistics.median(sizes[x]) for x in xs], marker="o", label=label,
                    linestyle="-" if label.startswith("icn") else "--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(f"{op}, 2 emulated hosts, 1 process per rank")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, png)


if __name__ == "__main__":
    rc = main(sys.argv[1])
    if len(sys.argv) > 2:
        plot(sys.argv[1], sys.argv[2])
    sys.exit(rc)
