#!/usr/bin/env python3
"""Parses an ICN Prometheus textfile with prometheus_client's parser and checks it against what the test ran.

usage: prom_check.py FILE EXPECTED.json HOST
EXPECTED.json: [{collective, message_size, algo_proto, count, mean_us, busbw_gbs}, ...]
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families

INSPECTOR_LABELS = {"version", "slurm_job_id", "node", "gpu", "comm_name", "n_nodes", "nranks", "collective",
                    "message_size", "algo_proto"}


def main():
    path, exp_path, host = sys.argv[1:4]
    text = open(path).read()
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples.setdefault(s.name, []).append(s)
    expected = json.load(open(exp_path))
    errors = []

    def find(name, e):
        hits = [s for s in samples.get(name, []) if s.labels.get("collective") == e["collective"]
                and s.labels.get("message_size") == e["message_size"] and s.labels.get("algo_proto") == e["algo_proto"]]
        if len(hits) != 1:
            errors.append("%s %s: %d series" % (name, e, len(hits)))
            return None
        return hits[0]

    for e in expected:
        bw = find("nccl_bus_bandwidth_gbs", e)
        t = find("nccl_collective_exec_time_microseconds", e)
        calls = find("icn_collective_calls_total", e)
        if not (bw and t and calls):
            continue
        if set(bw.labels) != INSPECTOR_LABELS or set(t.labels) != INSPECTOR_LABELS:
            errors.append("labels differ from NCCL Inspector's: %s" % sorted(bw.labels))
        want = {"slurm_job_id": "4242", "node": host, "gpu": "unknown", "comm_name": 'train dp "0"', "n_nodes": "1",
                "nranks": "2"}
        for k, v in want.items():
            if bw.labels.get(k) != v:
                errors.append("label %s=%r, want %r" % (k, bw.labels.get(k), v))
        if not math.isclose(t.value, e["mean_us"], rel_tol=1e-4):
            errors.append("exec time %s: %g, want %g" % (e["algo_proto"], t.value, e["mean_us"]))
        if not math.isclose(bw.value, e["busbw_gbs"], rel_tol=1e-4):
            errors.append("bus bandwidth %s: %g, want %g" % (e["algo_proto"], bw.value, e["busbw_gbs"]))
        if calls.value != e["count"]:
            errors.append("calls %s: %g, want %d" % (e["algo_proto"], calls.value, e["count"]))
    n_series = len(samples.get("nccl_collective_exec_time_microseconds", []))
    if n_series != len(expected):
        errors.append("%d exec-time series, %d expected" % (n_series, len(expected)))
    ts = samples.get("icn_metrics_timestamp_seconds", [])
    if len(ts) != 1 or ts[0].value < 1e9:
        errors.append("icn_metrics_timestamp_seconds missing or wrong: %s" % ts)
    for e in errors:
        print("FAIL:", e)
    print("checked %d series in %s" % (len(expected), path))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
