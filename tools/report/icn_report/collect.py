"""Gathers runs and probe results from what a previous `run` left (a raw directory with its
manifest, a merged results.json) or from plain nccl-tests outputs (-J files or stdout logs)."""
import json
import os

from . import ncclparse
from .ncclparse import Run

PROBE_TOOLS = {"icn-nvlink-bw": "nvlink", "icn-numa-bw": "numa"}
GENERATOR = "icn-bench-report"


def _split_stem(path):
    """'<variant>__<test>.json' names what the runner writes; other names keep the stem as the
    variant and let the file's own content name the test."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if "__" in stem:
        variant, test = stem.split("__", 1)
        return variant, test
    return stem, None


def _load_file(path, runs, probes, notes, meta=None):
    meta = meta or {}
    variant, test = _split_stem(path)
    variant = meta.get("variant", variant)
    test = meta.get("test", test)
    if path.endswith(".json"):
        try:
            obj, repaired = ncclparse.load_json_file(path)
        except (OSError, ValueError) as e:
            notes.append(str(e))
            return
        if isinstance(obj, dict) and obj.get("generator") == GENERATOR:
            runs.extend(Run.from_dict(d) for d in obj.get("runs", []))
            for k, v in (obj.get("probes") or {}).items():
                if v is not None:
                    probes[k] = v
            return
        if isinstance(obj, dict) and obj.get("tool") in PROBE_TOOLS:
            probes[PROBE_TOOLS[obj["tool"]]] = obj
            return
        if not isinstance(obj, dict) or "results" not in obj and "args" not in obj:
            notes.append("%s: not an nccl-tests -J file; ignored" % path)
            return
        run = ncclparse.run_from_json(obj, variant, test)
        run.repaired = repaired
        if repaired:
            notes.append("%s was cut short (crash or kill); read what it holds" % os.path.basename(path))
    else:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            notes.append(str(e))
            return
        run = ncclparse.run_from_log(text, variant, test)
    run.source_file = os.path.basename(path)
    for k in ("rc", "seconds", "cmd", "env", "log_tail"):
        if meta.get(k) is not None:
            setattr(run, k, meta[k])
    runs.append(run)


def load(paths):
    """Returns (runs, probes, notes)."""
    runs, probes, notes = [], {}, []
    for path in paths:
        if os.path.isdir(path):
            manifest = os.path.join(path, "manifest.json")
            if os.path.isfile(manifest):
                with open(manifest) as f:
                    man = json.load(f)
                for entry in man.get("runs", []):
                    js = os.path.join(path, entry.get("json") or "")
                    log = os.path.join(path, entry.get("log") or "")
                    src = js if entry.get("json") and os.path.isfile(js) else log
                    if entry.get("log") and os.path.isfile(log):
                        with open(log, errors="replace") as f:
                            entry = dict(entry, log_tail="\n".join(f.read().splitlines()[-15:]))
                    if src and os.path.isfile(src):
                        _load_file(src, runs, probes, notes, entry)
                    else:
                        r = Run(entry.get("variant", "?"), entry.get("test", "?"))
                        for k in ("rc", "seconds", "cmd", "env"):
                            setattr(r, k, entry.get(k))
                        runs.append(r)
                        notes.append("%s/%s left no output" % (r.variant, r.test))
                for name in man.get("probes", {}).values():
                    p = os.path.join(path, name)
                    if os.path.isfile(p):
                        _load_file(p, runs, probes, notes)
                continue
            names = sorted(os.listdir(path))
            jsons = {os.path.splitext(n)[0] for n in names if n.endswith(".json")}
            for n in names:
                full = os.path.join(path, n)
                if not os.path.isfile(full) or n == "manifest.json":
                    continue
                stem, ext = os.path.splitext(n)
                if ext == ".json" or (ext in (".log", ".txt", ".out") and stem not in jsons):
                    _load_file(full, runs, probes, notes)
        elif os.path.isfile(path):
            _load_file(path, runs, probes, notes)
        else:
            notes.append("%s does not exist" % path)
    return runs, probes, notes
