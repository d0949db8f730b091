"""Command line: `run` (execute and report) and `build` (report from recorded results)."""
import argparse
import json
import os
import sys
import time

from . import VERSION, collect, plots, render, runner

TITLE = "ICN benchmark report"


def write_report(runs, probes, notes, variant_info, out_dir, title):
    os.makedirs(out_dir, exist_ok=True)
    made = plots.make_plots(runs, variant_info, out_dir, notes)
    md = render.render(runs, probes, notes, variant_info, made, title)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(md)
    merged = {"generator": collect.GENERATOR, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "variants": variant_info, "runs": [r.to_dict() for r in runs], "probes": probes, "notes": notes}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(merged, f, indent=1)
    return made


def _common(p):
    p.add_argument("--out", required=True, help="directory for report.md, the PNG plots and results.json")
    p.add_argument("--title", default=TITLE)
    p.add_argument("--strict", action="store_true", help="exit 1 when any run failed its data check or exited non-zero")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="icn-bench-report", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    b = sub.add_parser("build", help="build the report from recorded results")
    b.add_argument("inputs", nargs="+", help="raw directories (with manifest.json), results.json files, "
                                             "nccl-tests -J files or stdout logs, probe JSON files")
    _common(b)

    r = sub.add_parser("run", help="run benchmarks, then build the report")
    r.add_argument("--nccl-tests", required=True, help="nccl-tests build directory (patched for the ICN tests)")
    r.add_argument("--plugin", help="path of libnccl-net-icn.so (needed by the icn variants)")
    r.add_argument("--probes", help="directory holding icn-nvlink-bw and icn-numa-bw (run when given)")
    r.add_argument("--raw", help="where the raw JSON/logs go (default: OUT/raw)")
    r.add_argument("--variants", default=",".join(runner.DEFAULT_VARIANTS),
                   help="comma list of: %s, or names given with --variant" % ", ".join(runner.BUILTIN_VARIANTS))
    r.add_argument("--variant", action="append", default=[], metavar="NAME:K=V[,K=V]",
                   help="define or redefine a variant (repeatable)")
    r.add_argument("--tests", default=",".join(runner.DEFAULT_TESTS), help="comma list of: %s" % ", ".join(runner.TESTS))
    r.add_argument("--ngpus", type=int, default=2, help="GPUs per process (-g)")
    r.add_argument("--minbytes", default="8")
    r.add_argument("--maxbytes", default="256M")
    r.add_argument("--moe-minbytes", default="1M")
    r.add_argument("--moe-maxbytes", default="256M")
    r.add_argument("--iters", type=int, default=20)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--timeout", type=int, default=600, help="seconds per run before it is killed")
    r.add_argument("--mixed-args", default="", help="extra options for mixed_traffic_perf, e.g. '--bcast_max 256M'")
    r.add_argument("--moe-args", default="", help="extra options for moe_alltoallv_perf, e.g. '--zipf 1.5 --topk 2'")
    r.add_argument("--nvlink-args", default="", help="extra options for icn-nvlink-bw")
    r.add_argument("--numa-args", default="", help="extra options for icn-numa-bw")
    r.add_argument("--env", action="append", default=[], metavar="K=V", help="set for every run (repeatable)")
    r.add_argument("--launcher", default="", help="command prefix, e.g. 'mpirun -np 2 -x NCCL_DEBUG'")
    r.add_argument("--no-force-net", dest="force_net", action="store_false",
                   help="do not add NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 to the network variants")
    _common(r)

    a = ap.parse_args(argv)
    if a.cmd == "build":
        runs, probes, notes = collect.load(a.inputs)
        variant_info = {}
        for path in a.inputs:
            man = os.path.join(path, "manifest.json") if os.path.isdir(path) else None
            if man and os.path.isfile(man):
                with open(man) as f:
                    variant_info.update(json.load(f).get("variants") or {})
            elif path.endswith(".json") and os.path.isfile(path):
                try:
                    with open(path) as f:
                        obj = json.load(f)
                    if isinstance(obj, dict) and obj.get("generator") == collect.GENERATOR:
                        variant_info.update(obj.get("variants") or {})
                except (OSError, ValueError):
                    pass
    else:
        import shlex
        try:
            custom = [runner.parse_variant_spec(s) for s in a.variant]
            names = [n for n in a.variants.split(",") if n]
            variants = runner.resolve_variants(names, custom, a.plugin, a.force_net)
            a.env = [tuple(kv.split("=", 1)) for kv in a.env]
            if any(len(kv) != 2 for kv in a.env):
                raise ValueError("--env takes KEY=VALUE")
        except ValueError as e:
            ap.error(str(e))
        tests = [t for t in a.tests.split(",") if t]
        unknown = [t for t in tests if t not in runner.TESTS]
        if unknown:
            ap.error("unknown test(s): %s" % ", ".join(unknown))
        a.launcher = shlex.split(a.launcher)
        raw = a.raw or os.path.join(a.out, "raw")
        manifest = runner.run_all(a, variants, tests, raw)
        runs, probes, notes = collect.load([raw])
        variant_info = manifest["variants"]
    if not runs and not probes:
        print("icn-bench-report: nothing to report (no runs or probe results found)", file=sys.stderr)
        return 2
    write_report(runs, probes, notes, variant_info, a.out, a.title)
    failed = [r for r in runs if not r.passed()]
    print("icn-bench-report: %s/report.md written (%d runs, %d failed)" % (a.out, len(runs), len(failed)))
    return 1 if (a.strict and failed) else 0
