"""Runs the chosen benchmarks under the chosen configurations ("variants") and records, for
each run, the -J JSON, the stdout log and a manifest entry (command, variant settings, exit
status, duration). Nothing here interprets results; collect/render do that."""
import json
import os
import shlex
import subprocess
import time

# Variants: environment settings layered over the caller's environment. "{plugin}" is the
# path of libnccl-net-icn.so. FORCE_NET keeps NCCL off NVLink/shared memory on one host so the
# network path is what gets measured (added when --force-net, the default).
FORCE_NET = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
BUILTIN_VARIANTS = {
    "nccl-default": ({"NCCL_NET_PLUGIN": "none"}, False,
                     "NCCL as shipped: no external plugin, NVLink/P2P where it can"),
    "nccl-socket": ({"NCCL_NET_PLUGIN": "none", "NCCL_NET": "Socket"}, True,
                    "NCCL's built-in Socket transport"),
    "icn": ({"NCCL_NET_PLUGIN": "{plugin}", "NCCL_TUNER_PLUGIN": "{plugin}", "NCCL_NET": "ICN"}, True,
            "ICN net plugin with its tuner"),
    "icn-tuner-off": ({"NCCL_NET_PLUGIN": "{plugin}", "NCCL_TUNER_PLUGIN": "{plugin}", "NCCL_NET": "ICN",
                       "ICN_TUNER": "off"}, True, "ICN net plugin, tuner disabled"),
}
DEFAULT_VARIANTS = ["nccl-default", "nccl-socket", "icn", "icn-tuner-off"]

# Benchmarks: binary name and whether the -b/-e sweep applies.
TESTS = {
    "all_reduce": ("all_reduce_perf", True),
    "all_gather": ("all_gather_perf", True),
    "reduce_scatter": ("reduce_scatter_perf", True),
    "alltoall": ("alltoall_perf", True),
    "sendrecv": ("sendrecv_perf", True),
    "broadcast": ("broadcast_perf", True),
    "mixed_traffic": ("mixed_traffic_perf", False),
    "moe_alltoallv": ("moe_alltoallv_perf", True),
}
DEFAULT_TESTS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "mixed_traffic",
                 "moe_alltoallv"]


def parse_variant_spec(spec):
    """'name:K=V,K=V' -> (name, {K: V})."""
    if ":" not in spec:
        raise ValueError("variant '%s' is not name:KEY=VALUE[,KEY=VALUE...]" % spec)
    name, rest = spec.split(":", 1)
    env = {}
    for item in filter(None, rest.split(",")):
        if "=" not in item:
            raise ValueError("variant '%s': '%s' is not KEY=VALUE" % (name, item))
        k, v = item.split("=", 1)
        env[k.strip()] = v.strip()
    if not name:
        raise ValueError("variant '%s' has no name" % spec)
    return name, env


def resolve_variants(names, custom, plugin, force_net):
    """Returns [(name, env, description)]; refuses ICN variants without a plugin path."""
    table = {k: (dict(v[0]), v[1], v[2]) for k, v in BUILTIN_VARIANTS.items()}
    for name, env in custom:
        table[name] = (env, False, "custom: " + ", ".join("%s=%s" % kv for kv in sorted(env.items())))
    out = []
    for name in names:
        if name not in table:
            raise ValueError("unknown variant '%s' (known: %s)" % (name, ", ".join(sorted(table))))
        env, wants_net, desc = table[name]
        if any("{plugin}" in v for v in env.values()):
            if not plugin:
                raise ValueError("variant '%s' needs --plugin /path/to/libnccl-net-icn.so" % name)
            env = {k: v.replace("{plugin}", os.path.abspath(plugin)) for k, v in env.items()}
        if wants_net and force_net:
            env = dict(FORCE_NET, **env)
        out.append((name, env, desc))
    return out


def build_command(test, opts, json_path):
    binary, sweep = TESTS[test]
    cmd = list(opts.launcher) + [os.path.join(opts.nccl_tests, binary), "-g", str(opts.ngpus)]
    if sweep:
        lo, hi = (opts.moe_minbytes, opts.moe_maxbytes) if test == "moe_alltoallv" else (opts.minbytes, opts.maxbytes)
        cmd += ["-b", lo, "-e", hi, "-f", "2", "-n", str(opts.iters), "-w", str(opts.warmup)]
    else:
        cmd += ["-w", "1"]
    cmd += ["-c", "1", "-J", json_path]
    if test == "mixed_traffic":
        cmd += shlex.split(opts.mixed_args or "")
    if test == "moe_alltoallv":
        cmd += shlex.split(opts.moe_args or "")
    return cmd


def _run(cmd, env, log_path, timeout):
    start = time.time()
    with open(log_path, "w") as log:
        log.write("# command: %s\n" % " ".join(shlex.quote(c) for c in cmd))
        log.flush()
        try:
            p = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = 124
            log.write("\n# icn-bench-report: killed after %d s\n" % timeout)
        except OSError as e:
            rc = 127
            log.write("\n# icn-bench-report: cannot start: %s\n" % e)
    return rc, time.time() - start


def run_all(opts, variants, tests, raw_dir, echo=print):
    os.makedirs(raw_dir, exist_ok=True)
    manifest = {"runs": [], "probes": {}, "variants": {n: {"env": e, "description": d} for n, e, d in variants}}
    base_env = dict(os.environ)
    for k, v in opts.env:
        base_env[k] = v
    for name, venv, _ in variants:
        for test in tests:
            stem = "%s__%s" % (name, test)
            json_path = os.path.join(raw_dir, stem + ".json")
            log_path = os.path.join(raw_dir, stem + ".log")
            if os.path.exists(json_path):
                os.remove(json_path)  # nccl-tests would write <file>.0 next to an existing one
            cmd = build_command(test, opts, json_path)
            env = dict(base_env, **venv)
            echo("[%s] %s ..." % (name, test))
            rc, secs = _run(cmd, env, log_path, opts.timeout)
            echo("[%s] %s: exit %d after %.1f s" % (name, test, rc, secs))
            manifest["runs"].append({"variant": name, "test": test, "cmd": cmd, "env": venv, "rc": rc,
                                     "seconds": round(secs, 2), "json": os.path.basename(json_path),
                                     "log": os.path.basename(log_path)})
    if opts.probes:
        for tool, key, extra in (("icn-nvlink-bw", "nvlink", shlex.split(opts.nvlink_args or "")),
                                 ("icn-numa-bw", "numa", shlex.split(opts.numa_args or ""))):
            out = os.path.join(raw_dir, key + ".json")
            log = os.path.join(raw_dir, key + ".log")
            cmd = [os.path.join(opts.probes, tool), "--json", out] + extra
            echo("[probe] %s ..." % tool)
            rc, secs = _run(cmd, base_env, log, opts.timeout)
            echo("[probe] %s: exit %d after %.1f s" % (tool, rc, secs))
            if rc == 0 and os.path.isfile(out):
                manifest["probes"][key] = os.path.basename(out)
    with open(os.path.join(raw_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest
