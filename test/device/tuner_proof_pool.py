#!/usr/bin/env python3
"""Pools several tuner_proof.sh outputs into one table: copies their raw logs into OUT/raw with the repetitions
renumbered, then runs tuner_proof_summary.py on OUT.

    tuner_proof_pool.py OUT [--paths nvl,net] DIR1 DIR2 ...

Pool only runs of the same build for the paths pooled (the table says nothing about which run a sample came from).
"""
import os
import re
import shutil
import subprocess
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    out, rest = args[0], args[1:]
    paths = {"nvl", "net"}
    if rest and rest[0] == "--paths":
        paths = set(rest[1].split(","))
        rest = rest[2:]
    raw_out = os.path.join(out, "raw")
    os.makedirs(raw_out, exist_ok=True)
    offset = 0
    for d in rest:
        raw = os.path.join(d, "raw")
        top = 0
        for name in sorted(os.listdir(raw)):
            m = re.match(r"^(nvl|net)-(.+)-r(\d+)\.txt$", name)
            if not m or m.group(1) not in paths:
                continue
            rep = int(m.group(3))
            top = max(top, rep)
            shutil.copy(os.path.join(raw, name), os.path.join(raw_out, f"{m.group(1)}-{m.group(2)}-r{rep + offset}.txt"))
        offset += top
    here = os.path.dirname(os.path.abspath(__file__))
    discovery = open(os.path.join(rest[0], "discovery.txt")).read().strip() if os.path.exists(
        os.path.join(rest[0], "discovery.txt")) else "?"
    subprocess.run([sys.executable, os.path.join(here, "tuner_proof_summary.py"), out, discovery], check=True)


if __name__ == "__main__":
    main()
