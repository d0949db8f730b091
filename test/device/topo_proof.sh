#!/usr/bin/env bash
# GPU proof for topo/ and shim/, for the 2x H200 machine.
#   usage: test/device/topo_proof.sh BUILD_DIR NCCL_TESTS_BIN_DIR
#   BUILD_DIR holds topo/icn-topo, shim/libicn-shim.so, shim/libnccl-env-icn.so and topo-runtime/ (a copy of
#   libhwloc.so.15, used only when the machine has no hwloc). Results go to $OUT (default ./topo-proof-out).
# Steps: icn-topo show/doctor/xml on the live machine; all_reduce_perf with NCCL_TOPO_FILE=<generated xml>
# (NCCL must log that it loaded it, data check must pass); all_reduce_perf with and without the shim preloaded,
# 3 interleaved runs each, median bus bandwidth compared; the env plugin with NCCL >= 2.28.9 (the venv's);
# a graph file from a heatmap. Exit status 0 only if every required check passed.
set -u
BUILD=${1:?usage: $0 BUILD_DIR NCCL_TESTS_BIN_DIR}
TESTS=${2:?usage: $0 BUILD_DIR NCCL_TESTS_BIN_DIR}
BUILD=$(cd "$BUILD" && pwd)
OUT=${OUT:-$PWD/topo-proof-out}
mkdir -p "$OUT"
TOPO="$BUILD/topo/icn-topo"
SHIM="$BUILD/shim/libicn-shim.so"
ENVPLUG="$BUILD/shim/libnccl-env-icn.so"
ARP="$TESTS/all_reduce_perf"
NGPU=${NGPU:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILS=0

note() { echo "$*" | tee -a "$SUMMARY"; }
pass() { note "PASS $*"; }
fail() { note "FAIL $*"; FAILS=$((FAILS + 1)); }
skip() { note "SKIP $*"; }

for f in "$TOPO" "$SHIM" "$ENVPLUG" "$ARP"; do
  [ -e "$f" ] || { echo "missing $f" | tee -a "$SUMMARY"; exit 2; }
done
if ldd "$TOPO" | grep -q "libhwloc.*not found"; then
  export LD_LIBRARY_PATH="$BUILD/topo-runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  note "using bundled libhwloc from $BUILD/topo-runtime"
fi
{ nvidia-smi topo -m; nvidia-smi -q -d PCIE | head -60; } >"$OUT/nvidia-smi.txt" 2>&1 || true
ldd "$ARP" | grep -i nccl >"$OUT/ldd-all_reduce_perf.txt" 2>&1 || true

# --- 1. show / doctor / xml on the live machine -------------------------------------------------------
"$TOPO" show >"$OUT/show.txt" 2>"$OUT/show.err"; rc=$?
[ $rc -eq 0 ] && grep -q "GPU1" "$OUT/show.txt" && pass "icn-topo show lists the GPUs" || fail "icn-topo show (rc $rc)"
"$TOPO" show --json >"$OUT/show.json" 2>>"$OUT/show.err"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['gpus'])>=2, d['gpus']" "$OUT/show.json" \
  && pass "icn-topo show --json parses, >= 2 GPUs" || fail "icn-topo show --json"
"$TOPO" doctor >"$OUT/doctor.txt" 2>&1; rc=$?
note "icn-topo doctor exit code $rc (0 clean, 1 findings): $(tail -1 "$OUT/doctor.txt")"
[ $rc -le 1 ] && pass "icn-topo doctor ran" || fail "icn-topo doctor crashed (rc $rc)"
"$TOPO" xml -o "$OUT/topo.xml" 2>"$OUT/xml.err" && pass "icn-topo xml written" || fail "icn-topo xml"
python3 - "$OUT/topo.xml" <<'PY' && pass "topo.xml basic NCCL rules (version, no tabs, lower-case busids, <=256 nodes)" || fail "topo.xml rules"
import re, sys
t = open(sys.argv[1]).read()
assert t.startswith('<system version="1"'), "version"
assert "\t" not in t, "tab"
ids = re.findall(r'busid="([^"]*)"', t)
assert ids and all(re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", b) for b in ids), ids
assert t.count("<") - t.count("</") <= 256
assert "<gpu " in t, "no GPU element (NVML not used?)"
PY

# --- helpers ---------------------------------------------------------------------------------------------
ARGS=(-b 8 -e 1G -f 4 -g "$NGPU" -c 1 -n 20 -w 5)
run_arp() {  # name, env assignments...
  local name=$1; shift
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV NCCL_NVLS_ENABLE=0 "$@" \
    timeout "$RUN_TIMEOUT" "$ARP" "${ARGS[@]}" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$OUT/$name.rc"
  return $rc
}
data_ok() {  # log: nccl-tests data check passed and no wrong values
  grep -q "Out of bounds values : 0 OK" "$1" && ! awk '/^ +[0-9]+ +[0-9]+ +float/ { if ($9 != "0" || $13 != "0") bad=1 } END { exit !bad }' "$1"
}

# --- 2. NCCL loads the generated file ---------------------------------------------------------------------
run_arp topo_file NCCL_TOPO_FILE="$OUT/topo.xml"; rc=$?
L="$OUT/topo_file.log"
[ $rc -eq 0 ] && data_ok "$L" && pass "all_reduce_perf with NCCL_TOPO_FILE=topo.xml: data check OK" \
  || fail "all_reduce_perf with NCCL_TOPO_FILE (rc $rc)"
grep -q "NCCL_TOPO_FILE set by environment to $OUT/topo.xml" "$L" && grep -q "Loading topology icn-topo" "$L" \
  && pass "NCCL INFO log shows it loaded our topology file" || fail "NCCL log does not show our topology file"
grep -E "NCCL_TOPO_FILE|Loading topology|Pattern|Ring 00|Channel 00/|GPU/|NET/" "$L" | head -40 >"$OUT/topo_file.excerpt"
# NCCL's own view of the machine for comparison (same run shape, no injected file).
NCCL_TOPO_DUMP_FILE="$OUT/nccl-dump.xml" run_arp nccl_dump; true

# --- 3. shim preloaded vs not: 3 interleaved runs each ------------------------------------------------------
for i in 1 2 3; do
  run_arp "base_$i"; rb=$?
  run_arp "shim_$i" LD_PRELOAD="$SHIM"; rs=$?
  [ $rb -eq 0 ] && data_ok "$OUT/base_$i.log" || fail "baseline run $i (rc $rb)"
  if [ $rs -eq 0 ] && data_ok "$OUT/shim_$i.log"; then :; else fail "shim run $i (rc $rs)"; fi
  grep -q "NCCL_TOPO_FILE set by environment to /proc/self/fd/" "$OUT/shim_$i.log" \
    && grep -q "Loading topology icn-topo" "$OUT/shim_$i.log" || fail "shim run $i: NCCL did not load the shim's file"
done
grep -q "NCCL_TOPO_FILE set by environment to /proc/self/fd/" "$OUT/shim_1.log" && pass "shim: NCCL loaded the generated file (all 3 runs checked)"
python3 - "$OUT" <<'PY' | tee -a "$SUMMARY"
import json, re, statistics, sys, os
out = sys.argv[1]
def table(path):
    rows = {}
    avg = None
    for line in open(path):
        m = re.match(r"\s+(\d+)\s+(\d+)\s+float\s+sum\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)", line)
        if m:
            rows[int(m.group(1))] = float(m.group(5))  # out-of-place busbw GB/s
        m = re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", line)
        if m:
            avg = float(m.group(1))
    return rows, avg
res = {"sizes": {}, "avg": {}}
for kind in ("base", "shim"):
    runs = [table(os.path.join(out, f"{kind}_{i}.log")) for i in (1, 2, 3)]
    res["avg"][kind] = [r[1] for r in runs]
    for r in runs:
        for size, bw in r[0].items():
            res["sizes"].setdefault(size, {}).setdefault(kind, []).append(bw)
ok = True
print("size_bytes  base_median  shim_median  ratio   base_runs / shim_runs (busbw GB/s)")
for size in sorted(res["sizes"]):
    d = res["sizes"][size]
    if len(d.get("base", [])) < 3 or len(d.get("shim", [])) < 3:
        continue
    b, s = statistics.median(d["base"]), statistics.median(d["shim"])
    ratio = s / b if b > 0 else float("nan")
    spread = (max(d["base"]) - min(d["base"])) / b if b > 0 else 0
    noisy = abs(ratio - 1) > max(0.05, 2 * spread)
    if size >= (1 << 20) and noisy:
        ok = False
    print(f"{size:>11} {b:12.2f} {s:12.2f} {ratio:7.3f}   {d['base']} / {d['shim']}{'  <-- outside noise' if noisy and size >= (1<<20) else ''}")
ab = [a for a in res["avg"]["base"] if a is not None]
ash = [a for a in res["avg"]["shim"] if a is not None]
if ab and ash:
    print(f"Avg bus bandwidth median: base {statistics.median(ab):.2f}  shim {statistics.median(ash):.2f} GB/s")
json.dump(res, open(os.path.join(out, "shim_vs_base.json"), "w"), indent=1)
print(("PASS" if ok else "FAIL") + " shim performance within noise of the baseline (sizes >= 1 MiB, |ratio-1| <= max(5%, 2x run spread))")
PY
tail -1 "$SUMMARY" | grep -q "^FAIL" && FAILS=$((FAILS + 1))

# --- 4. env plugin (needs NCCL >= 2.28.9: the system's 2.28.3 predates env plugins) -------------------------
NCCL_NEW=$(python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
paths = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for p in paths:
    for c in glob.glob(os.path.join(p, "nvidia", "nccl", "lib", "libnccl.so.2")):
        print(os.path.dirname(c)); raise SystemExit
PY
)
if [ -n "$NCCL_NEW" ]; then
  run_arp envplugin LD_LIBRARY_PATH="$NCCL_NEW${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_ENV_PLUGIN="$ENVPLUG"; rc=$?
  L="$OUT/envplugin.log"
  [ $rc -eq 0 ] && data_ok "$L" && pass "env plugin run: data check OK (NCCL from $NCCL_NEW)" || fail "env plugin run (rc $rc)"
  grep -q "Successfully loaded external env plugin" "$L" && grep -q "NCCL_TOPO_FILE set by environment to /proc/self/fd/" "$L" \
    && pass "env plugin: NCCL loaded it and took our NCCL_TOPO_FILE" || fail "env plugin not loaded / file not used"
else
  skip "env plugin: no NCCL >= 2.28.9 (nvidia/nccl/lib in the Python environment) found"
fi

# --- 5. graph file from a heatmap (2 ranks) ----------------------------------------------------------------
python3 - "$OUT/heatmap.json" "$NGPU" <<'PY'
import json, sys
n = int(sys.argv[2])
comms = [{"commId": "0x1", "rank": r, "nranks": n,
          "peers": [{"peerRank": q, "peer": "h:1", "channel": 0, "send_bytes": 1 << 30, "send_msgs": 1,
                     "recv_bytes": 1 << 30, "recv_msgs": 1} for q in range(n) if q != r], "collectives": []}
         for r in range(n)]
json.dump({"version": 1, "pid": 1, "host": "h", "time_ms": 0, "comms": comms}, open(sys.argv[1], "w"))
PY
if "$TOPO" graph --heatmap "$OUT/heatmap.json" -o "$OUT/graph.xml" 2>"$OUT/graph.err"; then
  run_arp graph_file NCCL_TOPO_FILE="$OUT/topo.xml" NCCL_GRAPH_FILE="$OUT/graph.xml"; rc=$?
  L="$OUT/graph_file.log"
  [ $rc -eq 0 ] && data_ok "$L" && grep -q "channels loaded from XML graph" "$L" \
    && pass "NCCL_GRAPH_FILE from icn-topo graph: loaded, data check OK" || fail "graph file run (rc $rc)"
else
  fail "icn-topo graph"
fi

note "failures: $FAILS"
echo "outputs in $OUT"
[ $FAILS -eq 0 ]
