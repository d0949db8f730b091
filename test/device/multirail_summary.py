#!/usr/bin/env python3
"""Tables of test/device/multirail_proof.sh: bandwidth of two links against one (ICN and NCCL's Socket), and what
each job did while a link went down and came back.

  multirail_summary.py RESULTS_TXT FLAPS_JSONL RATE
RESULTS_TXT holds icn-cluster-bench's CLUSTER lines (label GROUP@RATE, round_group), FLAPS_JSONL the flap runs'
events (start, down, up, end) and rank 0's PROGRESS points. Medians over rounds and repeats."""
import json
import statistics
import sys
from collections import defaultdict

GROUPS = ["icn", "icn-b", "icn-ask", "icn-ch4", "icn-nocopy", "icn-1", "socket", "socket-1"]
# Group: (column, ratio column, ratio numerator, denominator): a second build (PLUGIN_B), ICN asking for 2 channels
# per rail (ICN_TCP_CHANNELS_PER_RAIL=2), NCCL_MIN_NCHANNELS=4 set by the job.
OPTIONAL = [("icn-b", ("ICN build B", "ICN / build B", "icn", "icn-b")),
            ("icn-ask", ("ICN, 2 channels per rail", "ICN asking / ICN", "icn-ask", "icn")),
            ("icn-ch4", ("ICN, 4 channels", "ICN 4 channels / Socket 2", "icn-ch4", "socket"))]
SMALL = 1 << 20  # below this size the table gives the time per collective, not the bandwidth


def rate_bits(rate):
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * f
    return 0.0


def human(n):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"


def bandwidth(path, rate):
    rows = defaultdict(list)
    for line in open(path):
        if not line.startswith("CLUSTER ") or '"us"' not in line:
            continue
        r = json.loads(line[len("CLUSTER "):])
        group = r["label"].split("@")[0]
        rows[(r["nranks"], r["op"], r["bytes"], group)].append(r["us"] if r["bytes"] < SMALL else r["busbw_gbs"])
    if not rows:
        return []
    link = 2 * rate_bits(rate) / 8e9  # two links per host, GB/s
    out = ["## Bandwidth: two links per host against one",
           "",
           f"Each link shaped to {rate} both ways (two links: {link:.2f} GB/s per host and direction). Bus bandwidth "
           f"in GB/s from {human(SMALL)} (ratios: higher is better), time per collective in us below it (ratios: "
           "lower is better); median of rounds and repeats; ratios of the medians. ICN 2 links: lane 0 on both "
           "links (ICN_TCP_LANE0_COPY=1, the default); no copy: lane 0 on eth0 alone.",
           "",
           "| nodes | op | size | unit | ICN 2 links | ICN 2, no copy | ICN 1 link | Socket 2 ifs | Socket 1 if "
           "| ICN 2/1 | ICN copy / no copy | ICN 2 / Socket 2 | Socket 2/1 | ICN 2 / capacity |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    # Groups that run only when asked for: their column and a ratio, where they ran.
    extras = [(g, head) for g, head in OPTIONAL if any(x == g for (_, _, _, x) in rows)]
    for _, (name, rhead, _, _) in extras:
        out[-2] += f" {name} | {rhead} |"
        out[-1] += "---|---|"
    keys = sorted({(n, op, b) for (n, op, b, _) in rows})
    for n, op, b in keys:
        med = {g: statistics.median(rows[(n, op, b, g)]) if rows.get((n, op, b, g)) else None for g in GROUPS}

        def cell(g):
            return f"{med[g]:.3f}" if med[g] is not None else "-"

        def ratio(a, c):
            return f"{med[a] / med[c]:.2f}x" if med[a] and med[c] else "-"

        small = b < SMALL
        cap = f"{med['icn'] / link:.2f}" if med["icn"] and link and not small else "-"
        b_cells = "".join(f" {cell(g)} | {ratio(num, den)} |" for g, (_, _, num, den) in extras)
        out.append(f"| {n} | {op} | {human(b)} | {'us' if small else 'GB/s'} | {cell('icn')} | {cell('icn-nocopy')} | "
                   f"{cell('icn-1')} | {cell('socket')} | {cell('socket-1')} | {ratio('icn', 'icn-1')} | "
                   f"{ratio('icn', 'icn-nocopy')} | {ratio('icn', 'socket')} | {ratio('socket', 'socket-1')} | {cap} |"
                   + b_cells)
    return out + [""] + variants(rows)


def variants(rows):
    """Groups icn+NAME=VALUE...: ICN with settings added, against icn in the same run."""
    names = sorted({g for (_, _, _, g) in rows if g.startswith("icn+")})
    if not names:
        return []
    out = ["### ICN with settings added (icn+NAME=VALUE), against icn",
           "",
           "Same units as above; the ratio is the variant's median over icn's (bandwidth: higher is better; time: "
           "lower is better).",
           "",
           "| nodes | op | size | unit | icn | " + " | ".join(f"{n[4:]} | ratio" for n in names) + " |",
           "|---|---|---|---|---|" + "---|---|" * len(names)]
    for n, op, b in sorted({(n, op, b) for (n, op, b, _) in rows}):
        base = rows.get((n, op, b, "icn"))
        med = statistics.median(base) if base else None
        cells = []
        for g in names:
            v = rows.get((n, op, b, g))
            m = statistics.median(v) if v else None
            cells.append(f"{m:.3f} | {m / med:.2f}x" if m and med else "- | -")
        out.append(f"| {n} | {op} | {human(b)} | {'us' if b < SMALL else 'GB/s'} | "
                   f"{f'{med:.3f}' if med else '-'} | " + " | ".join(cells) + " |")
    return out + [""]


def iters_at(points, t):
    """Iterations done by time t, linear between PROGRESS points."""
    if not points or t <= points[0][0]:
        return points[0][1] if points else 0
    for (t0, i0), (t1, i1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return i0 + (i1 - i0) * (t - t0) / (t1 - t0) if t1 > t0 else i1
    return points[-1][1]


def rate(points, a, b):
    if b <= a or not points or b > points[-1][0]:
        return None
    return (iters_at(points, b) - iters_at(points, a)) / (b - a)


def longest_stall(points, a, b):
    """Longest time between two iterations' completions within [a, b] (to PROGRESS resolution)."""
    last, best = a, 0.0
    prev = None
    for t, i in points:
        if prev is not None and i > prev and t >= a:
            best = max(best, min(t, b) - last)
            last = t
        prev = i
        if t > b:
            break
    if last < b:
        best = max(best, min(b, points[-1][0] if points else b) - last)
    return best


def flaps(path):
    runs = defaultdict(lambda: {"events": [], "points": []})
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        e = json.loads(line)
        r = runs[e["tag"]]
        if e["kind"] == "progress":
            r["points"].append((e["t"], e["iter"]))
        else:
            r["events"].append(e)
    if not runs:
        return []
    out = ["## A link down and back during the job", "",
           "Per event: the link that went down (eth0 carries the handshake and ICN's lane 0), its outage, the longest "
           "time without a finished iteration from the link going down until the next event, the iteration rate "
           "while it was down (from 1.5 s after the cut, outages of 2.5 s or more), 1-2 s and 2-4 s after it came "
           "back, as ratios of the rate over the 4 s before the first event; and 1-2 s after back against the 2 s before this "
           "event's link went down (the job's own rate drifts over a run).",
           ""]
    for tag, r in runs.items():
        ev = r["events"]
        pts = sorted(r["points"])
        start = next((e for e in ev if e["kind"] == "start"), None)
        end = next((e for e in ev if e["kind"] == "end"), None)
        downs = [e for e in ev if e["kind"] == "down"]
        ups = [e for e in ev if e["kind"] == "up"]
        base = rate(pts, start["t"] - 4, start["t"]) if start else None
        group = start["group"] if start else "?"
        verdict = "finished, every element right" if end and end["finished"] else "did not finish"
        out.append(f"### {tag}: {start['nodes'] if start else '?'} nodes, {group}: {verdict}"
                   f" (exit codes {end['rcs'] if end else '?'}); before the first event {base or 0:.1f} iterations/s")
        out.append("")
        out.append("| event | host | link | outage s | longest stall s | while down | 1-2 s after back "
                   "| 2-4 s after back | 1-2 s after back / 2 s before |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        stalls, afters, soon, local = [], [], [], []
        for k, (d, u) in enumerate(zip(downs, ups)):
            nxt = downs[k + 1]["t"] if k + 1 < len(downs) else (end["t"] if end else u["t"] + 6)
            stall = longest_stall(pts, d["t"], nxt)
            during = rate(pts, d["t"] + 1.5, u["t"]) if u["t"] - d["t"] >= 2.5 else None
            after = rate(pts, u["t"] + 2, u["t"] + 4)
            early = rate(pts, u["t"] + 1, u["t"] + 2)
            before = rate(pts, d["t"] - 2, d["t"])
            stalls.append(stall)
            if early is not None and before:
                local.append(early / before)
            if after is not None and base:
                afters.append(after / base)
            if early is not None and base:
                soon.append(early / base)

            def fmt(x):
                return f"{x / base:.2f}x" if x is not None and base else "-"

            out.append(f"| {k + 1} | {d['host']} | eth{d.get('link', 1)} | {u['t'] - d['t']:.1f} | {stall:.2f} | "
                       f"{fmt(during)} | {fmt(early)} | {fmt(after)} | "
                       f"{f'{early / before:.2f}x' if early is not None and before else '-'} |")
        if stalls:
            out.append("")
            out.append(f"Longest stall median {statistics.median(stalls):.2f} s, max {max(stalls):.2f} s; "
                       f"1-2 s after back median {statistics.median(soon) if soon else 0:.2f}x, "
                       f"{sum(x >= 0.95 for x in soon)}/{len(soon)} events >= 0.95x; "
                       f"2-4 s after back median {statistics.median(afters) if afters else 0:.2f}x, "
                       f"{sum(x >= 0.95 for x in afters)}/{len(afters)} >= 0.95x; 1-2 s after back against the 2 s "
                       f"before the event median {statistics.median(local) if local else 0:.2f}x, "
                       f"{sum(x >= 0.95 for x in local)}/{len(local)} >= 0.95x.")
        out.append("")
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    lines = ["# Two links per host on the one-GPU cluster", ""]
    lines += bandwidth(sys.argv[1], sys.argv[3])
    lines += flaps(sys.argv[2])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
