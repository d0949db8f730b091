"""Tests of icn-bench-report on recorded fixtures (nccl-tests -J format, probe JSON, stdout logs)
and of its runner against a stand-in nccl-tests binary. No GPU needed."""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOOL = os.path.join(ROOT, "tools", "report", "icn-bench-report")
FIX = os.path.join(HERE, "fixtures")
sys.path.insert(0, os.path.join(ROOT, "tools", "report"))

from icn_report import ncclparse  # noqa: E402

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_tool(*args):
    p = subprocess.run([sys.executable, TOOL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=300)
    return p.returncode, p.stdout


class ParseTest(unittest.TestCase):
    def test_repair_closes_truncated_file(self):
        obj, repaired = ncclparse.load_json_file(os.path.join(FIX, "raw", "icn__sendrecv.json"))
        self.assertTrue(repaired)
        run = ncclparse.run_from_json(obj, "icn", "sendrecv")
        # The cut lands inside the 1 MiB row: the three complete rows before it survive.
        self.assertEqual([r["size"] for r in run.rows][:3], [8, 1024, 65536])

    def test_repair_drops_dangling_key(self):
        text = '{"a":1,"results":[{"size":8,"out_of_place":{"time":1.5,"bus_bw":0.1}},{"size":16,"out_of'
        obj = json.loads(ncclparse.repair_json(text))
        self.assertEqual(obj["results"][0]["size"], 8)
        self.assertEqual(obj["results"][1]["size"], 16)

    def test_json_rows(self):
        obj, _ = ncclparse.load_json_file(os.path.join(FIX, "raw", "icn__all_reduce.json"))
        run = ncclparse.run_from_json(obj)
        self.assertEqual(run.test, "all_reduce")
        self.assertEqual(len(run.rows), 26)
        last = run.rows[-1]
        self.assertEqual(last["size"], 268435456)
        self.assertAlmostEqual(last["busbw"], 11.49, places=2)
        self.assertEqual(run.net_plugin["net"], "ICN")
        self.assertTrue(run.passed())

    def test_log_rows(self):
        with open(os.path.join(FIX, "logs", "all_gather_perf.log")) as f:
            run = ncclparse.run_from_log(f.read())
        self.assertEqual(run.test, "all_gather")
        self.assertEqual(run.nccl_version, 22803)
        self.assertEqual(len(run.rows), 4)
        self.assertAlmostEqual(run.rows[-1]["busbw"], 354.12)
        self.assertAlmostEqual(run.rows[-1]["ip_busbw"], 356.02)
        self.assertTrue(run.out_of_bounds_ok)
        self.assertTrue(run.passed())

    def test_wrong_elements_fail_the_run(self):
        obj, _ = ncclparse.load_json_file(os.path.join(FIX, "fail", "icn__all_reduce.json"))
        run = ncclparse.run_from_json(obj)
        self.assertEqual(run.wrong_total(), 12)
        self.assertFalse(run.passed())
        self.assertIn("12 wrong", run.status())

    def test_version_format(self):
        self.assertEqual(ncclparse.fmt_version(22803), "2.28.3")


class BuildTest(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="icn-report-")

    def tearDown(self):
        shutil.rmtree(self.out, ignore_errors=True)

    def read(self, name):
        with open(os.path.join(self.out, name)) as f:
            return f.read()

    def test_report_from_raw_dir(self):
        rc, out = run_tool("build", os.path.join(FIX, "raw"), "--out", self.out)
        self.assertEqual(rc, 0, out)
        md = self.read("report.md")
        self.assertIn("1 of 13 runs FAILED", md)
        self.assertIn("| All-reduce | icn | pass | 11.49 | 256 MiB |", md)
        self.assertIn("| icn | sendrecv | -11 |", md)
        # mixed traffic: the slowdown columns of the fixture's small all-reduce in the mix
        self.assertIn("| icn | small_allreduce | mixed | 512 | 64 KiB-1 MiB | 1620.0 | 2592.0 |", md)
        self.assertIn("| nccl-default | 256 MiB | 148.34 | 107.14 | 72% | 1.37 | 0 |", md)
        self.assertIn("NV18 x 26.6 = 478 GB/s", md)
        self.assertIn("remote node costs 12% host->GPU, 20% GPU->host", md)
        self.assertIn("| icn | ICN | ICN | net:ICN, tuner:ICN |", md)
        merged = json.loads(self.read("results.json"))
        self.assertEqual(merged["generator"], "icn-bench-report")
        self.assertEqual(len(merged["runs"]), 13)
        self.assertEqual(merged["probes"]["nvlink"]["pairs"][0]["links"], 18)
        if not HAVE_MPL:
            self.skipTest("matplotlib is not installed: plots not checked (install python3-matplotlib)")
        for png in ("busbw.png", "latency.png", "mixed.png", "moe.png"):
            with open(os.path.join(self.out, png), "rb") as f:
                self.assertEqual(f.read(8), PNG_MAGIC, png)
            self.assertIn("](%s)" % png, md)

    def test_rebuild_from_results_json_is_stable(self):
        rc, out = run_tool("build", os.path.join(FIX, "raw"), "--out", self.out)
        self.assertEqual(rc, 0, out)
        first = json.loads(self.read("results.json"))
        again = os.path.join(self.out, "again")
        rc, out = run_tool("build", os.path.join(self.out, "results.json"), "--out", again)
        self.assertEqual(rc, 0, out)
        with open(os.path.join(again, "results.json")) as f:
            second = json.load(f)
        self.assertEqual(first["runs"], second["runs"])
        self.assertEqual(first["probes"], second["probes"])

    def test_strict_fails_on_bad_data(self):
        rc, out = run_tool("build", os.path.join(FIX, "fail"), "--out", self.out, "--strict")
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL (12 wrong elements)", self.read("report.md"))
        rc, out = run_tool("build", os.path.join(FIX, "fail"), "--out", self.out)
        self.assertEqual(rc, 0, out)

    def test_plain_logs(self):
        rc, out = run_tool("build", os.path.join(FIX, "logs", "all_gather_perf.log"), "--out", self.out)
        self.assertEqual(rc, 0, out)
        self.assertIn("| All-gather | all_gather_perf | pass | 354.12 | 128 MiB |", self.read("report.md"))

    def test_nothing_to_report(self):
        empty = os.path.join(self.out, "empty")
        os.makedirs(empty)
        rc, out = run_tool("build", empty, "--out", self.out)
        self.assertEqual(rc, 2, out)
        self.assertIn("nothing to report", out)


FAKE = textwrap.dedent(r'''
    #!/usr/bin/env python3
    # Stand-in for an nccl-tests binary: records its argv and the NCCL/ICN environment in a
    # -J file shaped like nccl-tests' own, with one result row.
    import json, os, sys
    args = sys.argv
    out = args[args.index("-J") + 1]
    env = ["%s=%s" % kv for kv in sorted(os.environ.items()) if kv[0].startswith(("NCCL_", "ICN_"))]
    fail = os.environ.get("FAKE_FAIL") == os.path.basename(args[0])
    row = {"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": "-1",
           "out_of_place": {"time": 10.0, "alg_bw": 0.1, "bus_bw": 0.1, "nwrong": 3.0 if fail else 0.0},
           "in_place": {"time": 10.0, "alg_bw": 0.1, "bus_bw": 0.1, "nwrong": 0.0},
           "actual_iterations": 1, "experiment_name": ""}
    json.dump({"version": 3, "args": args, "env": env, "nccl_version": 22803, "config": {"devices": []},
               "results": [row], "out_of_bounds": {"count": 1 if fail else 0, "okay": "false" if fail else "true"},
               "errors": []}, open(out, "w"))
    print("# fake %s" % " ".join(args))
    sys.exit(1 if fail else 0)
''').lstrip()


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="icn-runner-")
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)
        for name in ("all_reduce_perf", "moe_alltoallv_perf", "mixed_traffic_perf"):
            p = os.path.join(self.bin, name)
            with open(p, "w") as f:
                f.write(FAKE.replace("/usr/bin/env python3", sys.executable))
            os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC)
        self.plugin = os.path.join(self.tmp, "libnccl-net-icn.so")
        open(self.plugin, "w").close()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def load_raw(self, out):
        with open(os.path.join(out, "raw", "manifest.json")) as f:
            return json.load(f)

    def test_variants_set_the_environment_and_arguments(self):
        out = os.path.join(self.tmp, "out")
        rc, log = run_tool("run", "--nccl-tests", self.bin, "--plugin", self.plugin, "--out", out,
                           "--variants", "nccl-default,nccl-socket,icn-tuner-off", "--tests", "all_reduce,moe_alltoallv",
                           "--ngpus", "2", "--maxbytes", "64M", "--moe-args", "--zipf 1.5 --topk 2",
                           "--env", "NCCL_NVLS_ENABLE=0")
        self.assertEqual(rc, 0, log)
        man = self.load_raw(out)
        self.assertEqual(len(man["runs"]), 6)
        with open(os.path.join(out, "raw", "icn-tuner-off__all_reduce.json")) as f:
            rec = json.load(f)
        env = set(rec["env"])
        for want in ("ICN_TUNER=off", "NCCL_NET=ICN", "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1",
                     "NCCL_NVLS_ENABLE=0", "NCCL_NET_PLUGIN=" + os.path.abspath(self.plugin)):
            self.assertIn(want, env)
        args = rec["args"]
        self.assertEqual(args[args.index("-g") + 1], "2")
        self.assertEqual(args[args.index("-e") + 1], "64M")
        with open(os.path.join(out, "raw", "nccl-default__all_reduce.json")) as f:
            env = set(json.load(f)["env"])
        self.assertIn("NCCL_NET_PLUGIN=none", env)
        self.assertNotIn("NCCL_P2P_DISABLE=1", env)
        with open(os.path.join(out, "raw", "nccl-socket__moe_alltoallv.json")) as f:
            args = json.load(f)["args"]
        self.assertEqual(args[-4:], ["--zipf", "1.5", "--topk", "2"])
        self.assertIn("all runs passed", open(os.path.join(out, "report.md")).read())

    def test_failed_run_is_reported(self):
        out = os.path.join(self.tmp, "out")
        os.environ["FAKE_FAIL"] = "mixed_traffic_perf"
        try:
            rc, log = run_tool("run", "--nccl-tests", self.bin, "--out", out, "--variants", "nccl-default",
                               "--tests", "all_reduce,mixed_traffic", "--strict")
        finally:
            del os.environ["FAKE_FAIL"]
        self.assertEqual(rc, 1, log)
        md = open(os.path.join(out, "report.md")).read()
        self.assertIn("1 of 2 runs FAILED", md)
        self.assertIn("FAIL (exit 1)", md)

    def test_icn_variant_needs_plugin(self):
        rc, log = run_tool("run", "--nccl-tests", self.bin, "--out", os.path.join(self.tmp, "o"), "--variants", "icn")
        self.assertEqual(rc, 2)
        self.assertIn("needs --plugin", log)

    def test_custom_variant(self):
        out = os.path.join(self.tmp, "out")
        rc, log = run_tool("run", "--nccl-tests", self.bin, "--out", out, "--variants", "ring",
                           "--variant", "ring:NCCL_ALGO=Ring,NCCL_PROTO=Simple", "--tests", "all_reduce")
        self.assertEqual(rc, 0, log)
        with open(os.path.join(out, "raw", "ring__all_reduce.json")) as f:
            env = set(json.load(f)["env"])
        self.assertIn("NCCL_ALGO=Ring", env)
        self.assertIn("NCCL_PROTO=Simple", env)


if __name__ == "__main__":
    unittest.main()
