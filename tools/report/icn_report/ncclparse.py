"""Reading nccl-tests results: the -J JSON files (repairing ones cut short by a crash) and the
plain stdout tables of runs made without -J. Everything becomes a Run with normalised rows."""
import json
import os
import re

STANDARD_TESTS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast",
                  "reduce", "alltoallv", "gather", "scatter", "hypercube"]
ICN_TESTS = ["mixed_traffic", "moe_alltoallv"]


def _num(v):
    """nccl-tests writes NaN as the string "nan" and booleans as "true"/"false" strings."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _truthy(v):
    return v is True or (isinstance(v, str) and v.lower() == "true")


def _close(text):
    """Appends the closers of every string, list and object still open at the end of text."""
    stack, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
    out = text + ('"' if in_str else "")
    for opener in reversed(stack):
        out += "}" if opener == "{" else "]"
    return out


def repair_json(text):
    """Turns the prefix a killed writer left into valid JSON: close what is open; when the cut
    fell inside an element (a key without value, half a number), drop back to the previous
    comma and try again. The rows written before the crash survive."""
    cut = text.rstrip()
    for _ in range(200):
        candidate = _close(re.sub(r"[,:]\s*$", "", cut))
        try:
            json.loads(candidate)
            return candidate
        except json.JSONDecodeError:
            pos = cut.rfind(",")
            if pos <= 0:
                break
            cut = cut[:pos]
    return _close(text)


def load_json_file(path):
    """Returns (object, repaired: bool); raises ValueError when nothing can be read."""
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(repair_json(text)), True
    except json.JSONDecodeError as e:
        raise ValueError("%s: not JSON and not repairable (%s)" % (path, e))


def test_name_from_program(prog):
    base = os.path.basename(prog or "")
    base = re.sub(r"(_mpi)?$", "", base)
    return re.sub(r"_perf$", "", base)


class Run:
    """One benchmark execution: its identity, outcome and rows."""

    def __init__(self, variant, test):
        self.variant = variant
        self.test = test
        self.rc = None            # exit status when the runner launched it, else None
        self.seconds = None
        self.cmd = []
        self.env = {}             # the variant's settings (not the whole environment)
        self.source = None        # "json" | "log"
        self.source_file = None
        self.repaired = False
        self.rows = []
        self.devices = []
        self.nccl_version = None
        self.net_plugin = None
        self.out_of_bounds_ok = None
        self.avg_busbw = None
        self.errors = []
        self.config = {}
        self.extra_config = {}
        self.log_tail = ""

    def wrong_total(self):
        total = 0
        for r in self.rows:
            for k in ("nwrong", "ip_nwrong"):
                if r.get(k):
                    total += r[k]
        return total

    def passed(self):
        if self.rc not in (None, 0):
            return False
        if self.out_of_bounds_ok is False:
            return False
        if not self.rows:
            return False
        return self.wrong_total() == 0

    def status(self):
        if self.rc is not None and self.rc != 0:
            return "FAIL (exit %s)" % ("timeout" if self.rc == 124 else self.rc)
        if not self.rows:
            return "FAIL (no results)"
        if self.wrong_total() or self.out_of_bounds_ok is False:
            return "FAIL (%d wrong elements)" % self.wrong_total()
        return "pass"

    def to_dict(self):
        return {k: getattr(self, k) for k in (
            "variant", "test", "rc", "seconds", "cmd", "env", "source", "source_file", "repaired", "rows",
            "devices", "nccl_version", "net_plugin", "out_of_bounds_ok", "avg_busbw", "errors", "config",
            "extra_config", "log_tail")}

    @staticmethod
    def from_dict(d):
        r = Run(d.get("variant", "?"), d.get("test", "?"))
        for k, v in d.items():
            if hasattr(r, k):
                setattr(r, k, v)
        return r


def _row_from_json(entry):
    oop = entry.get("out_of_place") or {}
    ip = entry.get("in_place") or {}
    row = {
        "size": int(entry.get("size", 0) or 0),
        "count": int(entry.get("count", 0) or 0),
        "type": entry.get("type"),
        "redop": entry.get("redop"),
        "name": entry.get("experiment_name") or "",
        "time_us": _num(oop.get("time", oop.get("cpu_time"))),
        "algbw": _num(oop.get("alg_bw")),
        "busbw": _num(oop.get("bus_bw")),
        "nwrong": _num(oop.get("nwrong")),
        "ip_time_us": _num(ip.get("time", ip.get("cpu_time"))) if ip else None,
        "ip_algbw": _num(ip.get("alg_bw")) if ip else None,
        "ip_busbw": _num(ip.get("bus_bw")) if ip else None,
        "ip_nwrong": _num(ip.get("nwrong")) if ip else None,
    }
    for key in ("mixed_traffic", "moe"):
        if isinstance(entry.get(key), dict):
            row[key] = {k: (_num(v) if _num(v) is not None and k not in ("class", "mode") else v)
                        for k, v in entry[key].items()}
    return row


def run_from_json(obj, variant=None, test=None):
    args = obj.get("args") or []
    run = Run(variant or "?", test or test_name_from_program(args[0] if args else ""))
    run.source = "json"
    run.cmd = list(args)
    for entry in obj.get("results") or []:
        if isinstance(entry, dict):
            run.rows.append(_row_from_json(entry))
    cfg = obj.get("config") or {}
    run.devices = cfg.get("devices") or []
    run.config = {k: v for k, v in cfg.items() if k != "devices"}
    run.nccl_version = obj.get("nccl_version")
    run.net_plugin = obj.get("net_plugin")
    oob = obj.get("out_of_bounds")
    if isinstance(oob, dict):
        run.out_of_bounds_ok = _truthy(oob.get("okay")) or oob.get("count") == 0
    abw = obj.get("average_bus_bandwidth")
    if isinstance(abw, dict):
        run.avg_busbw = _num(abw.get("bandwidth"))
    run.errors = [e for e in (obj.get("errors") or []) if e]
    for key in ("mixed_traffic_config", "moe_config"):
        if isinstance(obj.get(key), dict):
            run.extra_config = obj[key]
    return run


_ROW_RE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+(.*)$")


def run_from_log(text, variant=None, test=None):
    """Parses nccl-tests' stdout table (size count type redop root, then out-of-place and
    in-place time/algbw/busbw/#wrong). ICN's own tests append extra columns; only the
    standard ones are read here."""
    run = Run(variant or "?", test or "?")
    run.source = "log"
    for line in text.splitlines():
        if line.startswith("#"):
            m = re.match(r"#\s*Collective test starting:\s*(\S+)", line)
            if m and run.test == "?":
                run.test = test_name_from_program(m.group(1))
            m = re.match(r"#\s*Out of bounds values\s*:\s*(\d+)", line)
            if m:
                run.out_of_bounds_ok = int(m.group(1)) == 0
            m = re.match(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", line)
            if m:
                run.avg_busbw = float(m.group(1))
            m = re.match(r"#\s*nccl-tests version \S+ nccl-headers=\d+ nccl-library=(\d+)", line)
            if m:
                run.nccl_version = int(m.group(1))
            continue
        m = _ROW_RE.match(line)
        if not m:
            continue
        cols = m.group(6).split()

        def val(i):
            if i >= len(cols) or cols[i] == "N/A":
                return None
            try:
                return float(cols[i])
            except ValueError:
                return None
        row = {"size": int(m.group(1)), "count": int(m.group(2)), "type": m.group(3), "redop": m.group(4),
               "name": "", "time_us": val(0), "algbw": val(1), "busbw": val(2), "nwrong": val(3),
               "ip_time_us": val(4), "ip_algbw": val(5), "ip_busbw": val(6), "ip_nwrong": val(7)}
        if row["time_us"] is None:
            continue
        run.rows.append(row)
    run.log_tail = "\n".join(text.splitlines()[-15:])
    return run


def fmt_version(code):
    """22803 -> 2.28.3 (NCCL_VERSION_CODE for 2.9+ is major*10000 + minor*100 + patch)."""
    if not code:
        return "?"
    code = int(code)
    return "%d.%d.%d" % (code // 10000, (code // 100) % 100, code % 100)
