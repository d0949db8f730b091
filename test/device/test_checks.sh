#!/usr/bin/env bash
# The GPU scripts' pass/fail rules without a GPU: recorded good outputs must pass, and broken variants of them (an
# NCCL WARN or failure line, a crash, wrong elements, a missing data check, missing results, a plugin NCCL did not
# use, a non-zero exit) must fail with their reason printed. Checked three ways: the shared rules in checks.sh, the
# Python summarisers' exit codes, and the scripts themselves run end to end against stand-ins for nccl-tests and
# icn-paired-allreduce that replay the recorded logs.
# Fixtures: test/fixtures/device, cut from recorded GPU runs (its README says which).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FIX="$ROOT/test/fixtures/device"
T=$(mktemp -d /tmp/icn-device-checks.XXXXXX)
trap 'rm -rf "$T"' EXIT
bad=0
ok() { echo "ok   $*"; }
nok() { echo "FAILED $*"; bad=$((bad + 1)); }

# expect NAME RC REGEX -- command...: runs the command, which must exit with RC and print REGEX (stdout+stderr).
expect() {
  local name=$1 want=$2 re=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    nok "$name: exit $rc, expected $want"; printf '%s\n' "$out" | tail -15 | sed 's/^/    | /'
  elif [ -n "$re" ] && ! grep -qE -- "$re" <<<"$out"; then
    nok "$name: output lacks /$re/"; printf '%s\n' "$out" | tail -15 | sed 's/^/    | /'
  else
    ok "$name"
  fi
}

# One check_run in a fresh shell, ending like a script does (device_checks_exit).
run_check() { bash -c '. "$1/checks.sh"; shift; check_run "$@"; device_checks_exit' _ "$HERE" "$@"; }

GOOD="$FIX/all_reduce_icn.log"
variant() {  # name, sed program applied to the good log
  sed -e "$2" "$GOOD" >"$T/$1.log"
  echo "$T/$1.log"
}
set_field() {  # name, row size, field, value: the good log with one field of one result row changed
  awk -v s="$2" -v f="$3" -v v="$4" '$1 == s {$f = v} {print}' "$GOOD" >"$T/$1.log"
  echo "$T/$1.log"
}

# --- 1. the shared rules ---------------------------------------------------------------------------------------
expect "good nccl-tests log passes (benign ICN fallback WARN included)" 0 "all passed" -- \
  run_check icn 0 "$GOOD" --data --expect "Using network ICN"
expect "non-zero exit fails" 1 "FAIL icn: exited with rc 3" -- run_check icn 3 "$GOOD" --data
expect "timeout fails" 1 "FAIL icn: timed out \(rc 124\)" -- run_check icn 124 "$GOOD" --data
expect "killed by a signal fails" 1 "killed by signal 9" -- run_check icn 137 "$GOOD" --data
expect "an NCCL WARN fails" 1 "error in warn.log: .*NCCL WARN NET/ICN : connection to peer lost" -- \
  run_check icn 0 "$(variant warn '/Using network ICN/a vm:1:1 [0] NCCL WARN NET/ICN : connection to peer lost')" --data
expect "an nccl-tests NCCL failure fails" 1 "Test NCCL failure" -- \
  run_check icn 0 "$(variant ncclfail '$a vm: Test NCCL failure common.cu:1157 '"'"'unhandled system error'"'"'')" --data
expect "a crash fails" 1 "Segmentation fault" -- \
  run_check icn 0 "$(variant segv '$a Segmentation fault (core dumped)')" --data
expect "wrong elements out of place fail" 1 "wrong elements in 1 result rows, first: 1048576 " -- \
  run_check icn 0 "$(set_field wrong1 1048576 9 777)" --data
expect "wrong elements in place fail" 1 "wrong elements in 1 result rows" -- \
  run_check icn 0 "$(set_field wrong2 2097152 13 12)" --data
expect "out of bounds values fail" 1 "Out of bounds values : 5" -- \
  run_check icn 0 "$(variant oob 's/Out of bounds values : 0 OK/Out of bounds values : 5 FAILED/')" --data
expect "a missing data check fails" 1 "data check did not report" -- \
  run_check icn 0 "$(variant nocheck '/Out of bounds values/d')" --data
expect "missing result rows fail" 1 "no nccl-tests result rows" -- \
  run_check icn 0 "$(variant norows '/^ *[0-9][0-9]* /d')" --rows
expect "an empty log fails" 1 "no output" -- run_check icn 0 "$T/none.log" --rows
expect "discovery: NCCL fell back to Socket" 1 "missing 'Using network ICN'" -- \
  run_check icn 0 "$(variant fallback 's/Using network ICN/Using network Socket/')" --data --expect "Using network ICN"
expect "a sanitizer report fails" 1 "AddressSanitizer" -- \
  run_check icn 0 "$(variant asan '$a ==1==ERROR: AddressSanitizer: heap-use-after-free')"

# nccl_versions.sh's checks on its recorded NCCL logs (one section per process).
awk -v d="$T" '/^## single rank/ {f=d "/one.log"} /^## two processes, rank 0/ {f=d "/two0.log"}
  /^## two processes, rank 1/ {f=d "/two1.log"} f {print > f}' "$FIX/nccl_2.28.3.log"
L="NET/Plugin: Loaded net plugin ICN"
expect "nccl_versions: recorded single rank passes" 0 "all passed" -- \
  run_check "single" 0 "$T/one.log" --expect "$L" --expect "nccl_init: rank 0 done"
# (the recorded excerpts of the two ranks stop before their "done" lines: nccl_versions.sh keeps 40 and 20 lines)
expect "nccl_versions: recorded rank 0 of 2 passes" 0 "all passed" -- \
  run_check "rank 0" 0 "$T/two0.log" --expect "$L" --expect "via NET/ICN"
expect "nccl_versions: recorded rank 1 of 2 passes" 0 "all passed" -- \
  run_check "rank 1" 0 "$T/two1.log" --expect "$L" --expect "via NET/ICN"
grep -v "nccl_init: rank 0 done" "$T/one.log" >"$T/one-unfinished.log"
expect "nccl_versions: a rank that never finished fails" 1 "missing 'nccl_init: rank 0 done'" -- \
  run_check "single" 0 "$T/one-unfinished.log" --expect "$L" --expect "nccl_init: rank 0 done"
grep -v "via NET/ICN" "$T/two0.log" >"$T/two0-nonet.log"
expect "nccl_versions: no channel through ICN fails" 1 "missing 'via NET/ICN'" -- \
  run_check "rank 0" 0 "$T/two0-nonet.log" --expect "$L" --expect "via NET/ICN"
grep -v "Loaded net plugin" "$T/one.log" >"$T/one-noplugin.log"
expect "nccl_versions: ICN not loaded fails" 1 "missing 'NET/Plugin: Loaded net plugin ICN'" -- \
  run_check "single" 0 "$T/one-noplugin.log" --expect "$L"

# --- 2. the Python summarisers ---------------------------------------------------------------------------------
mkdir -p "$T/net"
cp "$GOOD" "$T/net/icn_all_reduce_perf_r1.log"
cp "$FIX/all_reduce_socket.log" "$T/net/socket_all_reduce_perf_r1.log"
expect "net_summary: recorded runs pass" 0 "data-check failures \(#wrong != 0\): 0" -- python3 "$HERE/net_summary.py" "$T/net"
awk '$1 == "4194304" {$9 = "3"} {print}' "$FIX/all_reduce_socket.log" >"$T/net/socket_all_reduce_perf_r1.log"
expect "net_summary: wrong elements fail" 1 "FAIL socket_all_reduce_perf_r1: 3 wrong elements at 4194304 B" -- \
  python3 "$HERE/net_summary.py" "$T/net"
rm "$T/net/socket_all_reduce_perf_r1.log"
expect "net_summary: a missing transport fails" 1 "FAIL all_reduce_perf 524288 B: measured with icn only" -- \
  python3 "$HERE/net_summary.py" "$T/net"
rm "$T/net/icn_all_reduce_perf_r1.log"
expect "net_summary: no results fail" 1 "FAIL no nccl-tests result rows" -- python3 "$HERE/net_summary.py" "$T/net"

X="$FIX/xhost_results.txt"
expect "xhost_summary: recorded results pass" 0 "0 in every configuration" -- python3 "$HERE/xhost_summary.py" "$X"
sed '0,/"wrong": 0/s//"wrong": 4/' "$X" >"$T/xhost-wrong.txt"
expect "xhost_summary: wrong elements fail" 1 "FAIL icn-default: 4 wrong elements" -- python3 "$HERE/xhost_summary.py" "$T/xhost-wrong.txt"
# A DDP step whose ranks ended with different parameters (the recorded run may have no DDP steps at all).
{ cat "$X"; echo 'XHOST {"op": "ddp_step", "params_mib": 512, "ms": 300.0, "params_equal": false, "samples": [300.0], "label": "icn-default", "round": 1, "rank": 0, "world": 2, "host": "icnx-h0"}'; } >"$T/xhost-ddp.txt"
expect "xhost_summary: unequal DDP parameters fail" 1 "FAIL .*: 1 wrong elements" -- python3 "$HERE/xhost_summary.py" "$T/xhost-ddp.txt"
grep '"iperf3"' "$X" >"$T/xhost-none.txt"
expect "xhost_summary: no measurements fail" 1 "FAIL no measurements" -- python3 "$HERE/xhost_summary.py" "$T/xhost-none.txt"

P="$FIX/paired"
expect "paired_summary: recorded results pass" 0 "ICN online: within" -- python3 "$HERE/paired_summary.py" "$P"
mkdir -p "$T/paired"
cp "$P"/paired-nvl-p*.json "$T/paired/"
python3 - "$T/paired/paired-nvl-p2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["configs"] = [c for c in d["configs"] if c["name"] != "online"]
json.dump(d, open(sys.argv[1], "w"))
PY
expect "paired_summary: a missing configuration fails" 1 "FAIL paired-nvl-p2.json: no online configuration" -- \
  python3 "$HERE/paired_summary.py" "$T/paired"
expect "paired_summary: no results fail" 1 "FAIL no paired" -- python3 "$HERE/paired_summary.py" "$T/net"

mkdir -p "$T/tp/raw"
cp "$GOOD" "$T/tp/raw/nvl-default-r1.txt"
cp "$GOOD" "$T/tp/raw/nvl-online-r1.txt"
expect "tuner_proof_summary: recorded runs pass" 0 "ICN tuner proof" -- python3 "$HERE/tuner_proof_summary.py" "$T/tp" x
sed '/^ *[0-9][0-9]* /d' "$GOOD" >"$T/tp/raw/nvl-static-r1.txt"
expect "tuner_proof_summary: a run without results fails" 1 "FAIL raw/nvl-static-r1.txt: no result rows" -- \
  python3 "$HERE/tuner_proof_summary.py" "$T/tp" x

# --- 3. the scripts end to end, against stand-ins --------------------------------------------------------------
# nccl-tests stand-in: replays the recorded ICN or Socket log (by NCCL_NET_PLUGIN), plus the recorded tuner and
# profiler lines when NCCL logs TUNING; FAKE_NT_LOG replaces the log, FAKE_NT_RC the exit code.
mkdir -p "$T/nt" "$T/bin"
cat >"$T/nt/all_reduce_perf" <<EOF
#!/usr/bin/env bash
log="$GOOD"
[ "\${NCCL_NET_PLUGIN:-}" = none ] && log="$FIX/all_reduce_socket.log"
[ -n "\${FAKE_NT_LOG:-}" ] && log=\$FAKE_NT_LOG
cat "\$log"
[[ "\${NCCL_DEBUG_SUBSYS:-}" == *TUNING* ]] && grep -h "ICN tuner: comm\|ICN profiler: comm" "$T/one.log"
exit \${FAKE_NT_RC:-0}
EOF
for t in sendrecv_perf alltoall_perf; do ln -s all_reduce_perf "$T/nt/$t"; done
printf '#!/bin/sh\necho "GPU 0: stand-in"\necho "GPU 1: stand-in"\n' >"$T/bin/nvidia-smi"
# icn-paired-allreduce stand-in: the recorded results of one process, under the configuration names it was given.
cat >"$T/bin/paired" <<EOF
#!/usr/bin/env python3
import json, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
names = [a.split(":", 1)[0] for a in args if ":" in a and "=" in a]
rec = {c["name"]: c for c in json.load(open("$P/paired-nvl-p1.json"))["configs"]}
us = rec["default"]["us"]
json.dump({"configs": [{"name": n, "env": {}, "us": rec.get(n, {"us": us})["us"]} for n in names]}, open(out, "w"))
print("# stand-in: communicators ready")
EOF
chmod +x "$T/nt/all_reduce_perf" "$T/bin/nvidia-smi" "$T/bin/paired"
touch "$T/libnccl-net-icn.so"
export PATH="$T/bin:$PATH"

expect "net_proof.sh: recorded runs pass" 0 "device checks: all passed" -- \
  env OUT="$T/o1" bash "$HERE/net_proof.sh" "$T/libnccl-net-icn.so" "$T/nt" smoke
expect "net_proof.sh: an NCCL WARN fails the script" 1 "FAIL smoke_icn_ar: error in smoke_icn_ar.log: .*NCCL WARN NET/ICN : connection to peer lost" -- \
  env OUT="$T/o2" FAKE_NT_LOG="$T/warn.log" bash "$HERE/net_proof.sh" "$T/libnccl-net-icn.so" "$T/nt" smoke
expect "net_proof.sh: wrong elements fail the script" 1 "FAIL smoke_icn_ar: wrong elements" -- \
  env OUT="$T/o3" FAKE_NT_LOG="$T/wrong1.log" bash "$HERE/net_proof.sh" "$T/libnccl-net-icn.so" "$T/nt" smoke
expect "net_proof.sh: a failed run fails the script" 1 "FAIL smoke_sock_ar: exited with rc 2" -- \
  env OUT="$T/o4" FAKE_NT_RC=2 bash "$HERE/net_proof.sh" "$T/libnccl-net-icn.so" "$T/nt" smoke
expect "explore_cost.sh: recorded runs pass" 0 "device checks: all passed" -- \
  env OUT="$T/o5" bash "$HERE/explore_cost.sh" "$T/libnccl-net-icn.so" "$T/nt" 1
expect "explore_cost.sh: missing results fail the script" 1 "FAIL net icn r1: no nccl-tests result rows" -- \
  env OUT="$T/o6" FAKE_NT_LOG="$T/norows.log" bash "$HERE/explore_cost.sh" "$T/libnccl-net-icn.so" "$T/nt" 1
TP=(env ICN_PROOF_REPS=1 ICN_PROOF_PATHS=nvl ICN_PROOF_CONFIGS="default static")
expect "tuner_proof.sh: recorded runs pass" 0 "device checks: all passed" -- \
  env OUT="$T/o7" "${TP[@]}" bash "$HERE/tuner_proof.sh" "$T" "$T/nt"
expect "tuner_proof.sh: failed discovery fails the script" 1 "FAIL discovery: ICN tuner/profiler not loaded" -- \
  env OUT="$T/o8" FAKE_NT_LOG="$GOOD" "${TP[@]}" bash -c '
    sed -i "/TUNING/d" "$1/nt/all_reduce_perf"; bash "$2/tuner_proof.sh" "$1" "$1/nt"' _ "$T" "$HERE"
expect "paired_proof.sh: recorded results pass" 0 "device checks: all passed" -- \
  env OUT="$T/o9" ICN_PAIRED_PROCS=1 ICN_PAIRED_PATHS=nvl bash "$HERE/paired_proof.sh" "$T" "$T/bin/paired"
expect "paired_proof.sh: a crashed process fails the script" 1 "FAIL paired nvl p1: killed by signal 11 \(rc 139\)" -- \
  env OUT="$T/o10" ICN_PAIRED_PROCS=1 ICN_PAIRED_PATHS=nvl bash "$HERE/paired_proof.sh" "$T" \
  "$(printf '#!/bin/sh\necho "Segmentation fault"\nexit 139\n' >"$T/bin/crash"; chmod +x "$T/bin/crash"; echo "$T/bin/crash")"
expect "tuner_overhead.sh: a process without results fails the script" 1 "FAIL overhead p1: no results" -- \
  env OUT="$T/o11" ICN_OVERHEAD_PROCS=1 bash "$HERE/tuner_overhead.sh" "$T" "$T/bin/crash"
expect "topo_bundle.sh: a build without icn-topo fails" 1 "cannot stat" -- bash "$HERE/topo_bundle.sh" "$T/empty" "$T/bundle"

echo
if [ $bad -gt 0 ]; then echo "$bad check(s) failed"; exit 1; fi
echo "all device-script checks behave"
