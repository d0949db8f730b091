#!/usr/bin/env bash
# Tuner proof inside one process: NCCL's default, the six fixed NCCL_ALGO x NCCL_PROTO choices, ICN online and
# ICN static (the table the previous process learned) as separate communicators in ONE process, timed in
# interleaved rounds (test/device/paired_allreduce.cc). The machine's per-process latency mode (~13 vs ~19 us at
# 8 B from one process to the next) then hits every configuration alike, and each process gives one within-process
# ratio per size; the summary takes the median of those ratios over processes.
#
#   test/device/paired_proof.sh <dir with libnccl-net-icn.so> <icn-paired-allreduce binary>
#
# NVLink path 8 B..2 GiB, net path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) 8 B..32 MiB, -f 4.
# Env: OUT (results), ICN_PAIRED_PROCS (4 processes per path), ICN_PAIRED_ROUNDS (10), ICN_PAIRED_SMALL_ROUNDS (40:
#      rounds for sizes up to 1 MiB, which cost microseconds a block), ICN_PAIRED_PATHS ("nvl net"),
#      ICN_PAIRED_DEBUG=1 (NCCL_DEBUG=INFO for TUNING: the online communicator's decisions go to the .log files).
# Writes $OUT/paired-<path>-p<k>.{json,log,csv}, $OUT/paired_proof.md and (with matplotlib) paired_proof.png.
# Exit status 1 when a process failed or erred or wrote no results, or the summary found results missing
# (test/device/checks.sh, paired_summary.py); every reason is printed as a FAIL line.
set -u
. "$(dirname "$0")/checks.sh"
SO=$(readlink -f "${1:?usage: paired_proof.sh <so dir> <icn-paired-allreduce>}/libnccl-net-icn.so")
BIN=$(readlink -f "${2:?usage: paired_proof.sh <so dir> <icn-paired-allreduce>}")
OUT=${OUT:-$PWD/paired-proof}
PROCS=${ICN_PAIRED_PROCS:-4}
ROUNDS=${ICN_PAIRED_ROUNDS:-10}
SMALL_ROUNDS=${ICN_PAIRED_SMALL_ROUNDS:-40}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_NET_PLUGIN="$SO"
unset NCCL_ALGO NCCL_PROTO ICN_TUNER ICN_TUNER_CACHE ICN_TUNER_RULES ICN_HEATMAP_FILE
fixed=()
for a in Tree Ring; do
  for p in LL LL128 Simple; do fixed+=("$a-$p:ICN_TUNER=off,NCCL_ALGO=$a,NCCL_PROTO=$p"); done
done
for path in ${ICN_PAIRED_PATHS:-nvl net}; do
  if [ "$path" = net ]; then max=32M; penv=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1); else max=2G; penv=(); fi
  [ "${ICN_PAIRED_DEBUG:-0}" = 1 ] && penv+=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING)
  prev=""
  for k in $(seq 1 "$PROCS"); do
    cache="$OUT/paired-$path-p$k.csv"
    rm -f "$cache"
    configs=("default:ICN_TUNER=off" "${fixed[@]}" "online:ICN_TUNER=online,ICN_TUNER_CACHE=$cache")
    [ -n "$prev" ] && [ -s "$prev" ] && configs+=("static:ICN_TUNER=static,ICN_TUNER_CACHE=$prev")
    start=$(date +%s)
    env "${penv[@]}" timeout 300 "$BIN" -b 8 -e "$max" -f 4 -n 20 -w 5 -l 2 -L 40 -r "$ROUNDS" -R "$SMALL_ROUNDS" \
      -o "$OUT/paired-$path-p$k.json" "${configs[@]}" > "$OUT/paired-$path-p$k.log" 2>&1
    rc=$?
    echo "[paired-proof] $path process $k: rc=$rc in $(( $(date +%s) - start )) s"
    check_run "paired $path p$k" "$rc" "$OUT/paired-$path-p$k.log"
    [ -s "$OUT/paired-$path-p$k.json" ] || device_fail "paired $path p$k" "no results (paired-$path-p$k.json missing)"
    prev="$cache"
  done
done
python3 "$(dirname "$0")/paired_summary.py" "$OUT" --plot "$OUT/paired_proof.png" | tee "$OUT/paired_proof.md"
[ "${PIPESTATUS[0]}" = 0 ] || device_fail summary "paired_summary.py failed (reason above)"
device_checks_exit
