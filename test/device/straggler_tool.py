#!/usr/bin/env python3
"""Helpers of test/device/straggler_proof.sh: the CPU throttle, live detection queries on the ranks' NCCL logs, and
the summary of a run.

  straggler_tool.py throttle PID STOP_MS PERIOD_MS      SIGSTOP/SIGCONT duty cycle until SIGTERM (ends continued)
  straggler_tool.py named WORK TAG T0 RANK [--link]     exit 0 when a straggler line after T0 names RANK
  straggler_tool.py hangwarn WORK TAG T0 RANK           exit 0 when a rank other than RANK warned of no progress
  straggler_tool.py hangnamed JSON RANK                 exit 0 when icn-hang's --json output names RANK missing
  straggler_tool.py event FILE KEY=VALUE...             appends one JSON object (numbers where they parse)
  straggler_tool.py summary WORK                        summary.md on stdout, results.json into WORK

The NCCL logs (WORK/TAG_rankR.nccl) carry NCCL's own timestamp on every line (NCCL_DEBUG_TIMESTAMP_FORMAT
"%s.%3f_": Unix seconds with milliseconds); the script's injections are in WORK/events.jsonl, the cost runs' CLUSTER
lines in WORK/cost_results.txt.
"""
import glob
import json
import os
import re
import signal
import statistics
import sys
import time

LATE_RE = re.compile(r"ICN straggler: comm (\S+): rank (\d+) on \S+ .*? is late")
LINK_RE = re.compile(r"ICN straggler: comm (\S+): link rank (\d+) on .*? -> rank (\d+) on .*? runs at")
STAMP_RE = re.compile(r"^\s*(\d{9,11}\.\d+)\s")
HANGWARN_RE = re.compile(r"NCCL WARN ICN no network progress")


def throttle(pid, stop_ms, period_ms):
    stop = {"now": False}

    def end(_sig, _frm):
        stop["now"] = True

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)
    try:
        while not stop["now"]:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stop_ms / 1000.0)
            os.kill(pid, signal.SIGCONT)
            time.sleep(max(0.0, (period_ms - stop_ms) / 1000.0))
    except ProcessLookupError:
        return 0
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    return 0


def log_lines(work, tag):
    """(time, rank, line) of every timestamped line of the group's NCCL logs."""
    out = []
    for path in sorted(glob.glob(os.path.join(work, f"{tag}_rank*.nccl"))):
        rank = int(re.search(r"_rank(\d+)\.nccl$", path).group(1))
        with open(path, errors="replace") as f:
            for line in f:
                m = STAMP_RE.match(line)
                if m:
                    out.append((float(m.group(1)), rank, line.rstrip("\n")))
    out.sort()
    return out


def findings(work, tag):
    """Raised straggler findings: (time, logged by rank, kind, named ranks, text); cleared ones are left out."""
    out = []
    for t, rank, line in log_lines(work, tag):
        # Clearing lines ("is no longer late", "runs at the others' rate again") end a finding; they are not one.
        if "ICN straggler:" not in line or "no longer" in line or "rate again" in line:
            continue
        m = LATE_RE.search(line)
        if m:
            out.append((t, rank, "late_rank", {int(m.group(2))}, line.split("ICN straggler: ", 1)[1]))
            continue
        m = LINK_RE.search(line)
        if m:
            out.append((t, rank, "slow_link", {int(m.group(2)), int(m.group(3))}, line.split("ICN straggler: ", 1)[1]))
            continue
        out.append((t, rank, "other", set(), line.split("ICN straggler: ", 1)[1]))
    return out


def names(f, rank, link_ok):
    return rank in f[3] and (f[2] == "late_rank" or (link_ok and f[2] == "slow_link"))


def cmd_named(work, tag, t0, rank, link_ok):
    for f in findings(work, tag):
        if f[0] >= t0 and names(f, rank, link_ok):
            print(f"{f[0] - t0:.2f} s: {f[4]}")
            return 0
    return 1


def cmd_hangwarn(work, tag, t0, rank):
    for t, r, line in log_lines(work, tag):
        if t >= t0 and r != rank and HANGWARN_RE.search(line):
            print(f"{t - t0:.2f} s (rank {r})")
            return 0
    return 1


def hang_named(path, rank):
    try:
        with open(path) as f:
            analyses = json.load(f)
    except (OSError, ValueError):
        return None
    for a in analyses:
        if a.get("kind") == "missing_process" and a.get("roots") == [rank]:
            return a
    return None


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_s(x):
    return "-" if x is None else f"{x:.1f}"


def summary(work):
    events = []
    path = os.path.join(work, "events.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            events = [json.loads(line) for line in f if line.strip()]
    for e in events:
        if e.get("rank") is not None:
            e["rank"] = int(e["rank"])
    res = {"cases": {}, "cost": []}
    rows = []
    stamped = False
    for case in ("healthy", "throttle", "delay", "link"):
        evs = [e for e in events if e["case"] == case]
        if not evs:
            continue
        tag = evs[0]["tag"]
        lines = log_lines(work, tag)
        stamped = stamped or bool(lines)
        fs = findings(work, tag)
        injections = [e for e in evs if e["kind"] == "inject"]
        if case == "healthy":
            span = next(e for e in evs if e["kind"] == "span")
            false = [f for f in fs if span["t0"] <= f[0] <= span["t1"]]
            res["cases"][case] = {"seconds": span["t1"] - span["t0"], "false_reports": len(false),
                                  "false_examples": [f"{f[2]} logged by rank {f[1]}: {f[4]}" for f in false[:5]]}
            rows.append([case, f"none ({span['t1'] - span['t0']:.0f} s)", "-", "-", "-", str(len(false))])
            continue
        link_ok = case == "link"
        det, per = [], []
        for e in injections:
            hit = next((f for f in fs if e["t0"] <= f[0] <= e["t1"] + 0.5 and names(f, e["rank"], link_ok)), None)
            per.append({"rank": e["rank"], "detected_s": None if hit is None else hit[0] - e["t0"],
                        "logged_by_rank": None if hit is None else hit[1], "text": None if hit is None else hit[4],
                        "held_s": e["t1"] - e["t0"]})
            if hit is not None:
                det.append(hit[0] - e["t0"])
        # A finding is false unless it names the rank injected last (while held, or its tail while clearing):
        # before the first injection nothing is injected, so everything there is false.
        false = []
        for f in fs:
            last = [e for e in injections if e["t0"] <= f[0]]
            if not last or not names(f, last[-1]["rank"], link_ok):
                false.append(f)
        res["cases"][case] = {"injections": per, "false_reports": len(false),
                              "false_examples": [f"{f[2]} logged by rank {f[1]}: {f[4]}" for f in false[:5]]}
        rows.append([case, str(len(injections)), f"{len(det)}/{len(injections)}", fmt_s(med(det)),
                     fmt_s(max(det) if det else None), str(len(false))])
    hang = [e for e in events if e["case"] == "hang" and e["kind"] == "inject"]
    if hang:
        warn = [e["warn_s"] for e in hang if e.get("warn_s") is not None]
        named = [e["named_s"] for e in hang if e.get("named_s") is not None]
        res["cases"]["hang"] = {"injections": hang}
        rows.append(["hang: first 'no network progress' WARN", str(len(hang)), f"{len(warn)}/{len(hang)} warned",
                     fmt_s(med(warn)), fmt_s(max(warn) if warn else None), "-"])
        rows.append(["hang: icn-hang names the stopped rank (missing_process)", str(len(hang)),
                     f"{len(named)}/{len(hang)}", fmt_s(med(named)), fmt_s(max(named) if named else None),
                     str(sum(1 for e in hang if e.get("other_kind")))])
    print("| case | injections | named correctly | detection median (s) | detection max (s) | false / wrong reports |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if not stamped and rows:
        print("\nNo timestamped NCCL log line was found: NCCL_DEBUG_TIMESTAMP_FORMAT was not honoured, so detection "
              "times from the logs are missing.")
    for case, v in res["cases"].items():
        for x in v.get("false_examples", []):
            print(f"\n{case}, false report: `{x[:300]}`")
        for p in v.get("injections", []):
            if case != "hang" and p.get("text"):
                print(f"\n{case}, rank {p['rank']}: {p['detected_s']:.2f} s, logged by rank {p['logged_by_rank']}: "
                      f"`{p['text'][:300]}`")
        if case == "hang":
            for e in v["injections"]:
                verdict = (f"icn-hang named it after {fmt_s(e.get('named_s'))} s: {(e.get('summary') or '')[:300]}"
                           if e.get('named_s') is not None else
                           f"icn-hang did not name it missing_process (it answered {e.get('other_kind') or 'nothing'})")
                print(f"\nhang, rank {e['rank']}: WARN after {fmt_s(e.get('warn_s'))} s, {verdict}")
    cost = os.path.join(work, "cost_results.txt")
    if os.path.exists(cost):
        times = {}
        with open(cost) as f:
            for line in f:
                if not line.startswith("CLUSTER "):
                    continue
                d = json.loads(line[8:])
                if "us" not in d or d.get("op") == "init":
                    continue
                times.setdefault((d["op"], d["bytes"]), {}).setdefault(d["label"], []).append(d["us"])
        labels = sorted({lab for v in times.values() for lab in v})
        if len(labels) == 2 and "before" in labels:
            on = next(lab for lab in labels if lab != "before")
            print(f"\nCost: median us, '{on}' (this plugin, diagnosis on) against 'before' (the plugin before the "
                  "hooks), ratio = on / before (above 1: slower with the diagnosis)\n")
            print("| op | bytes | before (us) | on (us) | ratio | samples |")
            print("|---|---|---|---|---|---|")
            for (op, b) in sorted(times):
                v = times[(op, b)]
                if "before" not in v or on not in v:
                    continue
                mb, mo = med(v["before"]), med(v[on])
                res["cost"].append({"op": op, "bytes": b, "before_us": mb, "on_us": mo, "ratio": mo / mb,
                                    "samples": min(len(v["before"]), len(v[on]))})
                print(f"| {op} | {b} | {mb:.1f} | {mo:.1f} | {mo / mb:.3f} | {min(len(v['before']), len(v[on]))} |")
            rs = [c["ratio"] for c in res["cost"]]
            if rs:
                print(f"\nRatio over all sizes: median {med(rs):.3f}, range {min(rs):.3f}-{max(rs):.3f}")
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, a = argv[1], argv[2:]
    if cmd == "throttle":
        return throttle(int(a[0]), float(a[1]), float(a[2]))
    if cmd == "named":
        return cmd_named(a[0], a[1], float(a[2]), int(a[3]), "--link" in a[4:])
    if cmd == "hangwarn":
        return cmd_hangwarn(a[0], a[1], float(a[2]), int(a[3]))
    if cmd == "hangnamed":
        hit = hang_named(a[0], int(a[1]))
        if hit:
            print(hit.get("summary", ""))
        return 0 if hit else 1
    if cmd == "event":
        ev = {}
        for kv in a[1:]:
            k, _, v = kv.partition("=")
            try:
                ev[k] = float(v) if v.strip() else None
            except ValueError:
                ev[k] = v
        with open(a[0], "a") as f:
            f.write(json.dumps(ev) + "\n")
        return 0
    if cmd == "summary":
        return summary(a[0])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
