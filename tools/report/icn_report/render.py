"""Markdown rendering of collected runs and probe results."""
import time

from .ncclparse import STANDARD_TESTS, ICN_TESTS, fmt_version

TEST_TITLES = {
    "all_reduce": "All-reduce", "all_gather": "All-gather", "reduce_scatter": "Reduce-scatter",
    "alltoall": "All-to-all", "sendrecv": "Send/recv", "broadcast": "Broadcast", "reduce": "Reduce",
    "alltoallv": "All-to-all-v", "gather": "Gather", "scatter": "Scatter", "hypercube": "Hypercube",
    "mixed_traffic": "Mixed DDP traffic", "moe_alltoallv": "MoE all-to-all-v",
}


def human_size(n):
    n = int(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return ("%d %s" % (v, unit)) if v == int(v) else ("%.1f %s" % (v, unit))
    return "%d B" % n


def human_bytes(n):
    if n is None:
        return "-"
    return human_size(n) if n >= 1024 else "%d B" % n


def f(v, digits=1):
    if v is None:
        return "-"
    return ("%%.%df" % digits) % v


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def test_order(test):
    order = STANDARD_TESTS + ICN_TESTS
    return order.index(test) if test in order else len(order)


def ordered_variants(runs, variant_info):
    seen = []
    for v in list(variant_info.keys()) + [r.variant for r in runs]:
        if v not in seen and any(r.variant == v for r in runs):
            seen.append(v)
    return seen


def _nic_bytes(run):
    info = run.net_plugin or {}
    delta = info.get("nic_bytes_delta") or {}
    total = sum(v for v in delta.values() if isinstance(v, (int, float)))
    return total if delta else None


def _peak(run):
    best = None
    for r in run.rows:
        if r.get("busbw") is not None and (best is None or r["busbw"] > best["busbw"]):
            best = r
    return best


def summary_section(runs, variants):
    rows = []
    for r in sorted(runs, key=lambda r: (test_order(r.test), variants.index(r.variant) if r.variant in variants else 99)):
        peak = _peak(r)
        first = min(r.rows, key=lambda x: x["size"]) if r.rows else None
        net = (r.net_plugin or {}).get("net", "-")
        tuner = (r.net_plugin or {}).get("tuner", "-")
        rows.append([TEST_TITLES.get(r.test, r.test), r.variant, r.status(),
                     f(peak["busbw"], 2) if peak else "-", human_size(peak["size"]) if peak else "-",
                     f(first["time_us"], 2) if first else "-", net, tuner, human_bytes(_nic_bytes(r))])
    return table(["test", "variant", "result", "peak busbw (GB/s)", "at size", "time at smallest size (us)",
                  "net plugin", "tuner", "NIC bytes moved"], rows)


def setup_section(runs, variant_info, variants):
    lines = []
    devices = next((r.devices for r in runs if r.devices), [])
    for d in devices:
        if isinstance(d, dict):
            lines.append("- rank %s: %s (%s) on %s" % (d.get("rank"), d.get("device_info", "?"), d.get("device_hex", "?"),
                                                    d.get("hostname", "?")))
    versions = sorted({fmt_version(r.nccl_version) for r in runs if r.nccl_version})
    if versions:
        lines.append("- NCCL library: %s" % ", ".join(versions))
    rows = []
    for v in variants:
        info = variant_info.get(v) or {}
        env = info.get("env") or next((r.env for r in runs if r.variant == v and r.env), {})
        rows.append([v, info.get("description", ""), " ".join("`%s=%s`" % kv for kv in sorted((env or {}).items())) or "-"])
    return "\n".join(lines) + "\n\n" + table(["variant", "what", "settings"], rows)


def identity_section(runs, variants):
    rows = []
    for v in variants:
        rs = [r for r in runs if r.variant == v and r.net_plugin]
        if not rs:
            continue
        info = rs[0].net_plugin
        loaded = ", ".join("%s:%s" % (p.get("kind"), p.get("name")) for p in info.get("loaded") or []) or "none"
        nic = sum(_nic_bytes(r) or 0 for r in rs)
        heat = any((r.net_plugin or {}).get("icn_heatmap") for r in rs)
        rows.append([v, info.get("net", "-"), info.get("tuner", "-"), loaded, human_bytes(nic), "yes" if heat else "no"])
    if not rows:
        return "_No run recorded plugin identity (plain nccl-tests output)._"
    return table(["variant", "net", "tuner", "plugins loaded", "NIC bytes (all runs)", "ICN counters"], rows)


def collective_section(test, runs, variants):
    rs = {r.variant: r for r in runs if r.test == test}
    sizes = sorted({row["size"] for r in rs.values() for row in r.rows})
    if len(sizes) > 24:
        sizes = sizes[::2] + ([sizes[-1]] if sizes[-1] not in sizes[::2] else [])
    header = ["size"]
    vs = [v for v in variants if v in rs]
    for v in vs:
        header += ["%s busbw" % v, "%s time (us)" % v]
    rows = []
    for s in sizes:
        line = [human_size(s)]
        for v in vs:
            row = next((x for x in rs[v].rows if x["size"] == s), None)
            line += [f(row["busbw"], 2) if row else "-", f(row["time_us"], 1) if row else "-"]
        rows.append(line)
    return table(header, rows)


def mixed_section(runs, variants):
    rows = []
    for v in variants:
        for r in [x for x in runs if x.variant == v and x.test == "mixed_traffic"]:
            for row in r.rows:
                m = row.get("mixed_traffic") or {}
                rows.append([v, m.get("class", row["name"]), m.get("mode", "-"), "%d" % (m.get("ops") or 0),
                             human_size(m.get("min_op_bytes") or 0) + "-" + human_size(m.get("max_op_bytes") or 0),
                             f(m.get("p50_us")), f(m.get("p99_us")), f(row.get("busbw"), 2),
                             f(m.get("slowdown_p50"), 2) + "x", f(m.get("slowdown_p99"), 2) + "x",
                             f(m.get("bw_slowdown"), 2) + "x" if m.get("mode") == "mixed" else "-",
                             f(m.get("overlap_pct"), 0) + "%",
                             "-" if row.get("nwrong") is None else "%d" % row["nwrong"]])
    if not rows:
        return None
    return table(["variant", "class", "mode", "ops", "op sizes", "P50 (us)", "P99 (us)", "busbw (GB/s)",
                  "slowdown P50", "slowdown P99", "bw slowdown", "overlap", "#wrong"], rows)


def moe_section(runs, variants):
    rows = []
    for v in variants:
        for r in [x for x in runs if x.variant == v and x.test == "moe_alltoallv"]:
            by_size = {}
            for row in r.rows:
                mode = (row.get("moe") or {}).get("mode") or row["name"].split("/")[-1]
                by_size.setdefault(row["size"], {})[mode] = row
            for size in sorted(by_size):
                bal = by_size[size].get("balanced")
                skew = next((x for k, x in by_size[size].items() if k != "balanced"), None)
                m = (skew or {}).get("moe") or {}
                wrong = sum(int(x.get("nwrong") or 0) for x in by_size[size].values())
                rows.append([v, human_size(size), f(bal["busbw"], 2) if bal else "-", f(skew["busbw"], 2) if skew else "-",
                             f(100 * m["busbw_vs_balanced"], 0) + "%" if m.get("busbw_vs_balanced") is not None else "-",
                             f(m.get("imbalance"), 2), "%d" % wrong])
    if not rows:
        return None
    return table(["variant", "bytes per rank", "balanced busbw", "Zipf busbw", "Zipf vs balanced",
                  "max/mean received", "#wrong"], rows)


def nvlink_section(nv):
    if not nv:
        return None
    lines = []
    for g in nv.get("gpus", []):
        if g.get("nvlink_active"):
            lines.append("- GPU %s %s (%s): NVLink v%s, %s active links x %.1f GB/s" % (
                g.get("dev"), g.get("name"), g.get("pci"), g.get("nvlink_version"), g.get("nvlink_active"),
                (g.get("link_MBps") or 0) / 1000.0))
        else:
            lines.append("- GPU %s %s (%s): no active NVLink reported%s" % (
                g.get("dev"), g.get("name"), g.get("pci"), (" - " + g["error"]) if g.get("error") else ""))
    rows = []
    for p in nv.get("pairs", []):
        link = ("NV%d x %.1f = %.0f GB/s" % (p["links"], p["link_GBps"], p["peak_GBps"])) if p.get("peak_GBps") else "unknown"
        rows.append(["%s<->%s" % (p["a"], p["b"]), link, "%s / %s" % (f(p.get("ce_a_to_b_GBps")), f(p.get("ce_b_to_a_GBps"))),
                     f(p.get("ce_bidir_GBps")), "%s / %s" % (f(p.get("sm_a_to_b_GBps")), f(p.get("sm_b_to_a_GBps"))),
                     f(p.get("pct_of_peak"), 0) + "%" if p.get("peak_GBps") else "-",
                     f(p.get("ce_latency_us"), 2), f(p.get("pingpong_one_way_us"), 2)])
    return "\n".join(lines) + "\n\n" + table(
        ["pair", "links (per direction)", "copy engine a->b / b->a (GB/s)", "both directions (GB/s)",
         "SM write a->b / b->a (GB/s)", "best vs link peak", "8 B copy (us)", "ping-pong one-way (us)"], rows)


def numa_section(nm):
    if not nm:
        return None
    cells = nm.get("cells", [])
    nodes = sorted({c["node"] for c in cells})
    devs = sorted({c["dev"] for c in cells})
    rows = []
    for n in nodes:
        line = ["%d" % n]
        for d in devs:
            c = next((x for x in cells if x["node"] == n and x["dev"] == d), None)
            line.append(("%s / %s%s" % (f(c["h2d_GBps"]), f(c["d2h_GBps"]), " (local)" if c.get("local") else "")) if c else "-")
        rows.append(line)
    text = table(["NUMA node"] + ["GPU %d h2d / d2h (GB/s)" % d for d in devs], rows)
    pen = ["- GPU %s (node %s): remote node costs %.0f%% host->GPU, %.0f%% GPU->host" % (
        g["dev"], g["numa_node"], g.get("h2d_penalty_pct", 0), g.get("d2h_penalty_pct", 0))
        for g in nm.get("gpus", []) if g.get("h2d_penalty_pct") or g.get("d2h_penalty_pct")]
    return text + ("\n\n" + "\n".join(pen) if pen else "\n\n_Single NUMA node with memory, or no penalty measured._")


def runs_section(runs):
    rows = []
    for r in runs:
        cmd = " ".join(r.cmd or [])
        rows.append([r.variant, r.test, "-" if r.rc is None else r.rc, f(r.seconds, 1), r.source or "-",
                     "`%s`" % cmd if cmd else "-"])
    return table(["variant", "test", "exit", "seconds", "from", "command"], rows)


def render(runs, probes, notes, variant_info, plots, title):
    variants = ordered_variants(runs, variant_info)
    out = ["# %s" % title, "",
           "Generated %s by icn-bench-report from %d run(s)." % (time.strftime("%Y-%m-%d %H:%M:%S"), len(runs)), ""]
    failed = [r for r in runs if not r.passed()]
    out.append("**Data checks and exits: %s.**" % ("all runs passed" if runs and not failed else
                                                 "%d of %d runs FAILED" % (len(failed), len(runs))))
    out += ["", "## Summary", "", summary_section(runs, variants), "",
            "## Setup", "", setup_section(runs, variant_info, variants), "",
            "## Plugin identity and counters", "", identity_section(runs, variants), ""]
    tests = sorted({r.test for r in runs if r.test not in ICN_TESTS}, key=test_order)
    if tests:
        out += ["## Collectives: bus bandwidth and latency", ""]
        for name in ("busbw", "latency"):
            if name in plots:
                out += ["![%s](%s)" % (name, plots[name]), ""]
        for t in tests:
            out += ["### %s" % TEST_TITLES.get(t, t), "", collective_section(t, runs, variants), ""]
    mixed = mixed_section(runs, variants)
    if mixed:
        out += ["## Mixed DDP traffic (mixed_traffic_perf)", "",
                "Each class alone, then all classes concurrently on their own communicators and streams. "
                "Slowdown: per-op latency in the mix over the same op size alone (P50/P99 of the ratios); "
                "bw slowdown: alone bandwidth over mixed bandwidth; overlap: ops that ran while another class was active.",
                "", mixed, ""]
        if "mixed" in plots:
            out += ["![mixed](%s)" % plots["mixed"], ""]
    moe = moe_section(runs, variants)
    if moe:
        out += ["## MoE all-to-all with skewed splits (moe_alltoallv_perf)", "", moe, ""]
        if "moe" in plots:
            out += ["![moe](%s)" % plots["moe"], ""]
    nv = nvlink_section(probes.get("nvlink"))
    if nv:
        out += ["## Scale-up: NVLink pairs (icn-nvlink-bw)", "", nv, ""]
    nm = numa_section(probes.get("numa"))
    if nm:
        out += ["## Scale-up: host memory per NUMA node (icn-numa-bw)", "", nm, ""]
    out += ["## Runs", "", runs_section(runs), ""]
    for r in failed:
        if r.log_tail:
            out += ["<details><summary>%s / %s: %s</summary>" % (r.variant, r.test, r.status()), "", "```",
                    r.log_tail, "```", "</details>", ""]
    if notes:
        out += ["## Notes", ""] + ["- %s" % n for n in notes] + [""]
    return "\n".join(out)
