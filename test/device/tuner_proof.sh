#!/usr/bin/env bash
# GPU proof for the ICN tuner on one host with 2 GPUs (written for 2x H200).
#
#   test/device/tuner_proof.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>
#
# For the NVLink path and the net path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), five interleaved repetitions of:
#   default (NCCL's own choice), the six fixed NCCL_ALGO x NCCL_PROTO choices (Tree/Ring x LL/LL128/Simple),
#   ICN online (fresh table, learns while running) and ICN static (the table the online run persisted, no
#   exploration). Every run loads our .so as the net plugin (ICN_TUNER=off for default/fixed) so all configurations
#   use the same transport; NCCL_NVLS_ENABLE=0 always.
# The online run learns in-process: nccl-tests' warm-up (-w calls at every power of two) and first sweep are its
# learning phase (~20 calls per size bucket), the second sweep is slack, the third (-N 3) is what the table
# reports (the summary keeps the last sweep of every log). Every configuration runs the same sweeps and reports
# its last one, so all are compared at the same age of their process (a process's later sweeps run faster).
# Once per path a diagnostic online run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING (not in the table: NCCL
# logs a line per collective there) records every ICN decision and how many collectives the profiler timed
# (diag-<path>-online.txt, decisions.log).
# Results (raw logs, decision logs, caches, table, plot) go to $OUT. Expected device time: ~5 min for both paths.
# Knobs: ICN_PROOF_ITERS (20) ICN_PROOF_WARMUP (20) ICN_PROOF_MAX_NVL (4G) ICN_PROOF_MAX_NET (64M)
#        ICN_PROOF_REPS (5) ICN_PROOF_BUDGET_S (420: no new run starts after this) ICN_PROOF_PATHS ("nvl net")
#        ICN_PROOF_SWEEPS (3) ICN_PROOF_CONFIGS ("default fixed online static diag").
# Exit status 1 when discovery failed, a run failed or erred or left no result rows, or the summary found no
# results (test/device/checks.sh); runs skipped for the budget are not failures.
set -u
SO_DIR=${1:?usage: tuner_proof.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>}
NT_DIR=${2:?usage: tuner_proof.sh <dir with libnccl-net-icn.so> <nccl-tests build dir>}
OUT=${OUT:-$PWD/tuner-proof-out}
SO=$(readlink -f "$SO_DIR/libnccl-net-icn.so")
ARP="$NT_DIR/all_reduce_perf"
[ -x "$ARP" ] || ARP="$NT_DIR/build/all_reduce_perf"
ITERS=${ICN_PROOF_ITERS:-20}
WARMUP=${ICN_PROOF_WARMUP:-20}
MAX_NVL=${ICN_PROOF_MAX_NVL:-4G}
MAX_NET=${ICN_PROOF_MAX_NET:-64M}
REPS=${ICN_PROOF_REPS:-5}
BUDGET=${ICN_PROOF_BUDGET_S:-420}
SWEEPS=${ICN_PROOF_SWEEPS:-${ICN_PROOF_ONLINE_SWEEPS:-3}}
PATHS=${ICN_PROOF_PATHS:-"nvl net"}
CONFIGS=${ICN_PROOF_CONFIGS:-"default fixed online static diag"}  # subset to re-run some configurations only
want() { [[ " $CONFIGS " == *" $1 "* ]]; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/checks.sh"

mkdir -p "$OUT/raw"
log() { echo "[tuner-proof $(date +%T)] $*" | tee -a "$OUT/proof.log"; }
[ -f "$SO" ] || { log "missing $SO_DIR/libnccl-net-icn.so"; exit 1; }
[ -x "$ARP" ] || { log "missing all_reduce_perf in $NT_DIR"; exit 1; }
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${NGPU:-0}" -ge 2 ] || { log "needs 2 GPUs, found ${NGPU:-0}"; exit 1; }
START=$(date +%s)
export NCCL_NVLS_ENABLE=0
export NCCL_NET_PLUGIN="$SO"
unset NCCL_ALGO NCCL_PROTO NCCL_TUNER_PLUGIN NCCL_PROFILER_PLUGIN ICN_TUNER ICN_TUNER_CACHE ICN_HEATMAP_FILE
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
"$ARP" -h > "$OUT/nccl-tests-help.txt" 2>&1 || true

# 1) Does NCCL find tuner and profiler inside the net plugin with only NCCL_NET_PLUGIN set?
EXTRA_ENV=()
probe() {
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING ICN_TUNER=online \
    timeout 120 "$ARP" -b 8 -e 8 -g 2 -n 1 -w 1 -c 0 > "$OUT/raw/probe.txt" 2>&1
  grep -q "ICN tuner: comm" "$OUT/raw/probe.txt" && grep -q "ICN profiler: comm" "$OUT/raw/probe.txt"
}
if probe; then
  DISCOVERY="found inside the net plugin (NCCL_NET_PLUGIN only)"
elif probe NCCL_TUNER_PLUGIN="$SO" NCCL_PROFILER_PLUGIN="$SO"; then
  DISCOVERY="NOT found via NCCL_NET_PLUGIN alone; used NCCL_TUNER_PLUGIN/NCCL_PROFILER_PLUGIN=$SO"
  EXTRA_ENV=(NCCL_TUNER_PLUGIN="$SO" NCCL_PROFILER_PLUGIN="$SO")
else
  log "tuner/profiler not loaded even with NCCL_TUNER_PLUGIN; see raw/probe.txt"
  DISCOVERY="FAILED"
  device_fail discovery "ICN tuner/profiler not loaded (no 'ICN tuner: comm' and 'ICN profiler: comm' in raw/probe.txt)"
fi
log "tuner discovery: $DISCOVERY"
echo "$DISCOVERY" > "$OUT/discovery.txt"

# 2) The sweep.
FIXED="Tree,LL Tree,LL128 Tree,Simple Ring,LL Ring,LL128 Ring,Simple"
run() {  # path config rep maxbytes -- env...   (config "diag": log file outside the table)
  local path=$1 cfg=$2 rep=$3 max=$4; shift 4
  local elapsed=$(( $(date +%s) - START ))
  if [ "$elapsed" -gt "$BUDGET" ]; then
    log "budget ${BUDGET}s used up: skipping $path/$cfg/r$rep"
    return
  fi
  local cycles=$SWEEPS file="$OUT/raw/$path-$cfg-r$rep.txt"
  [ "$cfg" = diag ] && file="$OUT/raw/diag-$path-online.txt"
  local t0=$(date +%s%N)
  env "$@" timeout 240 "$ARP" -b 8 -e "$max" -f 4 -g 2 -n "$ITERS" -w "$WARMUP" -c 0 -N "$cycles" > "$file" 2>&1
  local rc=$?
  log "$path $cfg r$rep rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  check_run "$path/$cfg/r$rep" "$rc" "$file" --rows
}
for rep in $(seq 1 "$REPS"); do
  for path in $PATHS; do
    if [ "$path" = net ]; then
      PENV=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1); MAX=$MAX_NET
    else
      PENV=(); MAX=$MAX_NVL
    fi
    want default && run "$path" default "$rep" "$MAX" "${PENV[@]}" ICN_TUNER=off
    for f in $FIXED; do
      want fixed && run "$path" "${f/,/-}" "$rep" "$MAX" "${PENV[@]}" ICN_TUNER=off NCCL_ALGO="${f%,*}" NCCL_PROTO="${f#*,}"
    done
    CACHE="$OUT/cache-$path-r$rep.csv"
    if want online; then
      rm -f "$CACHE"
      # Measured without NCCL's INFO log: NCCL_DEBUG_SUBSYS=TUNING prints a line per collective, which
      # alone adds ~10 us to every small all-reduce. The learned table is in $CACHE.
      # No ICN_HEATMAP_FILE here: an explicit file keeps timing on all the time (the default snapshot is a live
      # view that goes with the process).
      run "$path" online "$rep" "$MAX" "${PENV[@]}" "${EXTRA_ENV[@]}" ICN_TUNER=online ICN_TUNER_CACHE="$CACHE"
    fi
    want static && run "$path" static "$rep" "$MAX" "${PENV[@]}" "${EXTRA_ENV[@]}" ICN_TUNER=static ICN_TUNER_CACHE="$CACHE"
    if [ "$rep" = 1 ] && want diag; then
      run "$path" diag "$rep" "$MAX" "${PENV[@]}" "${EXTRA_ENV[@]}" ICN_TUNER=online \
        ICN_TUNER_CACHE="$OUT/cache-$path-diag.csv" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING
    fi
  done
done
for f in "$OUT"/raw/diag-*-online.txt; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"
  grep -h "ICN tuner:\|ICN profiler:" "$f"
done > "$OUT/decisions.log" 2>/dev/null || true

# 3) Summary table + plot.
python3 "$HERE/tuner_proof_summary.py" "$OUT" "$DISCOVERY" 2>&1 | tee -a "$OUT/proof.log"
[ "${PIPESTATUS[0]}" = 0 ] || device_fail summary "tuner_proof_summary.py failed (reason above)"
log "total $(( $(date +%s) - START ))s"
device_checks_exit
