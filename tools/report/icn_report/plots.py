"""PNG plots (matplotlib, Agg backend): bus bandwidth and latency against message size on log
axes, one panel per collective and one line per variant; mixed-traffic latencies; MoE busbw."""
import io
import math
import os

from .ncclparse import ICN_TESTS
from .render import TEST_TITLES, human_size, ordered_variants, test_order


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    """A 64-colour palette PNG: a plot's few colours in a quarter of the bytes of full colour."""
    from PIL import Image  # matplotlib's own dependency
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(colors=64).save(path, optimize=True)


def _size_axis(ax):
    from matplotlib.ticker import FuncFormatter, LogLocator
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_size(v).replace(" ", "") if v >= 1 else ""))
    ax.grid(True, which="major", alpha=0.3)


def _grid(n):
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    return int(math.ceil(n / cols)), cols


def collective_plot(plt, runs, variants, key, ylabel, path):
    tests = sorted({r.test for r in runs if r.test not in ICN_TESTS and r.rows}, key=test_order)
    if not tests:
        return False
    nr, nc = _grid(len(tests))
    fig, axes = plt.subplots(nr, nc, figsize=(6 * nc, 4 * nr), squeeze=False)
    for i, t in enumerate(tests):
        ax = axes[i // nc][i % nc]
        for v in variants:
            for r in [x for x in runs if x.test == t and x.variant == v]:
                pts = sorted((row["size"], row[key]) for row in r.rows if row.get(key) and row[key] > 0)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=v)
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_title(TEST_TITLES.get(t, t))
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    for j in range(len(tests), nr * nc):
        axes[j // nc][j % nc].axis("off")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True


def mixed_plot(plt, runs, variants, path):
    data = []  # (variant, class, mode, p50, p99)
    for v in variants:
        for r in [x for x in runs if x.variant == v and x.test == "mixed_traffic"]:
            for row in r.rows:
                m = row.get("mixed_traffic") or {}
                if m.get("p50_us"):
                    data.append((v, m.get("class"), m.get("mode"), m["p50_us"], m.get("p99_us") or m["p50_us"]))
    if not data:
        return False
    classes = []
    for d in data:
        if d[1] not in classes:
            classes.append(d[1])
    fig, axes = plt.subplots(1, len(classes), figsize=(5 * len(classes), 4), squeeze=False)
    for i, c in enumerate(classes):
        ax = axes[0][i]
        labels, p50, p99 = [], [], []
        for v in variants:
            for mode in ("alone", "mixed"):
                hit = [d for d in data if d[0] == v and d[1] == c and d[2] == mode]
                if hit:
                    labels.append("%s\n%s" % (v, mode))
                    p50.append(hit[0][3])
                    p99.append(hit[0][4])
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="P50")
        ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="P99")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=7, rotation=45, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("op latency (us)")
        ax.set_title(c)
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True


def moe_plot(plt, runs, variants, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for v in variants:
        for r in [x for x in runs if x.variant == v and x.test == "moe_alltoallv"]:
            modes = {}
            for row in r.rows:
                mode = (row.get("moe") or {}).get("mode") or row["name"].split("/")[-1] or "?"
                if row.get("busbw") and row["busbw"] > 0:
                    modes.setdefault(mode, []).append((row["size"], row["busbw"]))
            for mode, pts in sorted(modes.items()):
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".",
                        linestyle="--" if mode == "balanced" else "-", label="%s %s" % (v, mode))
                drawn = True
    if not drawn:
        plt.close(fig)
        return False
    _size_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("bytes dispatched per rank")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title("MoE all-to-all-v: Zipf-skewed vs balanced")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True


def make_plots(runs, variant_info, out_dir, notes):
    """Returns {name: relative file name} for the plots written."""
    try:
        plt = _pyplot()
    except ImportError as e:
        notes.append("matplotlib is not available (%s): no plots" % e)
        return {}
    variants = ordered_variants(runs, variant_info)
    made = {}
    jobs = [("busbw", lambda p: collective_plot(plt, runs, variants, "busbw", "busbw (GB/s)", p)),
            ("latency", lambda p: collective_plot(plt, runs, variants, "time_us", "time (us)", p)),
            ("mixed", lambda p: mixed_plot(plt, runs, variants, p)),
            ("moe", lambda p: moe_plot(plt, runs, variants, p))]
    for name, fn in jobs:
        fname = name + ".png"
        if fn(os.path.join(out_dir, fname)):
            made[name] = fname
    return made
