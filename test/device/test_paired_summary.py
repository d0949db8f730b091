#!/usr/bin/env python3
"""paired_summary.py: ratios are taken inside each process before pooling, so a process that is slower as a whole
(the machine's per-process latency mode) does not move them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def write(directory, path, k, scale, online_8b):
    base = {"default": 12.0, "Tree-LL": 10.0, "Tree-LL128": 11.0, "Tree-Simple": 14.0, "Ring-LL": 10.5,
            "Ring-LL128": 13.0, "Ring-Simple": 15.0, "online": online_8b}
    configs = [{"name": n, "env": {}, "us": {"8": [t * scale, t * scale * 1.01, 500.0]}} for n, t in base.items()]
    with open(os.path.join(directory, f"paired-{path}-p{k}.json"), "w") as f:
        json.dump({"configs": configs}, f)


class PairedSummary(unittest.TestCase):
    def run_summary(self, directory):
        r = subprocess.run([sys.executable, os.path.join(HERE, "paired_summary.py"), directory],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_ratio_is_within_process(self):
        with tempfile.TemporaryDirectory() as d:
            # Online at 10.2 us vs best fixed 10.0 in a fast process and 1.9x everything in a slow one: pooled
            # absolute medians would mix the modes; within-process ratios stay 1.02 and 1.2 for the default.
            write(d, "nvl", 1, 1.0, 10.2)
            write(d, "nvl", 2, 1.9, 10.2)
            write(d, "nvl", 3, 1.0, 10.2)
            out = self.run_summary(d)
            row = next(l for l in out.splitlines() if l.startswith("| 8 B |"))
            cells = [c.strip() for c in row.strip("|").split("|")]
            self.assertIn("(Tree-LL)", cells[1])
            self.assertEqual(cells[2], "1.200")
            self.assertEqual(cells[3], "1.020")
            self.assertIn("within 1.03x of the best fixed choice at 1/1 sizes", out)

    def test_miss_is_flagged(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "net", 1, 1.0, 11.0)
            out = self.run_summary(d)
            self.assertIn("1.100 !", out)
            self.assertIn("at 0/1 sizes", out)

    def write_rounds(self, d, online):
        base = {"default": 12.0, "Tree-LL": 10.0, "Tree-LL128": 11.0, "Tree-Simple": 14.0, "Ring-LL": 10.5,
                "Ring-LL128": 13.0, "Ring-Simple": 15.0}
        configs = [{"name": n, "env": {}, "us": {"8": [t] * len(online)}} for n, t in base.items()]
        configs.append({"name": "online", "env": {}, "us": {"8": online}})
        with open(os.path.join(d, "paired-nvl-p1.json"), "w") as f:
            json.dump({"configs": configs}, f)

    def test_steady_miss_is_a_clear_miss(self):
        with tempfile.TemporaryDirectory() as d:
            self.write_rounds(d, [10.9, 11.0, 11.0, 11.1, 11.2])  # every round 1.09-1.12x the best
            out = self.run_summary(d)
            self.assertIn("clearly beyond 1.03x (the whole 90% interval above it) at 1/1 sizes: 8 B", out)

    def test_noisy_miss_is_not_a_clear_miss(self):
        with tempfile.TemporaryDirectory() as d:
            # Online's rounds straddle the target (0.98, 1.01, 1.05, 1.06, 1.08 of the best): the median misses,
            # but resampled rounds put it below the target often enough that the interval includes it.
            self.write_rounds(d, [9.8, 10.1, 10.5, 10.6, 10.8])
            out = self.run_summary(d)
            row = next(l for l in out.splitlines() if l.startswith("| 8 B |"))
            cells = [c.strip() for c in row.strip("|").split("|")]
            self.assertEqual(cells[3], "1.050 !")
            lo, hi = (float(x) for x in cells[6].split("-"))
            self.assertLessEqual(lo, 1.03)
            self.assertGreater(hi, 1.05)
            self.assertIn("at 0/1 sizes.", out)

    @unittest.skipUnless(__import__("importlib").util.find_spec("matplotlib"), "python3-matplotlib not installed")
    def test_plot_is_written(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "nvl", 1, 1.0, 10.2)
            png = os.path.join(d, "out.png")
            r = subprocess.run([sys.executable, os.path.join(HERE, "paired_summary.py"), d, "--plot", png],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_empty_directory_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, os.path.join(HERE, "paired_summary.py"), d],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("no paired-", r.stderr)


if __name__ == "__main__":
    unittest.main()
