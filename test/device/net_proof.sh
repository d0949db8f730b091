#!/usr/bin/env bash
# Net path proof on the 2-GPU machine: nccl-tests through the ICN net plugin vs NCCL's built-in Socket
# transport, both on the net path (P2P and SHM off), interleaved runs, data check on.
#   test/device/net_proof.sh PLUGIN_SO NCCL_TESTS_BUILD_DIR [smoke|full] [RUNS]
# Logs go to $OUT (default /tmp/icn-out); python3 test/device/net_summary.py $OUT writes the Markdown tables.
# Exit status 1 when any run failed, erred, counted wrong elements or did not use the transport it asked for
# (test/device/checks.sh); every reason is printed as a FAIL line.
set -u
. "$(dirname "$0")/checks.sh"
PLUGIN=$(realpath "$1"); NT=$(realpath "$2"); MODE=${3:-full}; RUNS=${4:-3}
OUT=${OUT:-/tmp/icn-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
# nccl-tests was built against CUDA 13 / NCCL 2.28.9 headers; run with the system NCCL (2.28.3).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi -L
echo "NCCL libs:"; ldconfig -p | grep -E "libnccl.so|libucp.so|libhwloc.so|libibverbs.so" | head
ldd "$NT/all_reduce_perf" | grep -E "nccl|cudart|not found"

run() {  # name transport test args...
  local name=$1 transport=$2 test=$3; shift 3
  local envs=()
  if [ "$transport" = icn ]; then envs=(NCCL_NET_PLUGIN="$PLUGIN" ICN_TUNER=off); else envs=(NCCL_NET_PLUGIN=none NCCL_NET=Socket); fi
  env "${envs[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$NT/$test" -g 2 -c 1 "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  grep -E "NET/|ICN|Using network" "$OUT/$name.log" | head -4
  grep -E "^ +[0-9]+ " "$OUT/$name.log" | awk -v n="$name" '{print n, $0}' >> "$OUT/rows.txt"
  grep -E "Out of bounds|#wrong|Avg bus bandwidth" "$OUT/$name.log" | tail -2
  echo "== $name rc=$rc"
  local used="Using network Socket"
  [ "$transport" = icn ] && used="Using network ICN"
  check_run "$name" "$rc" "$OUT/$name.log" --data --expect "$used"
}

if [ "$MODE" = smoke ]; then
  run smoke_icn_ar icn all_reduce_perf -b 8 -e 64M -f 8 -n 5 -w 2
  run smoke_sock_ar socket all_reduce_perf -b 8 -e 64M -f 8 -n 5 -w 2
  device_checks_exit
fi
for r in $(seq 1 "$RUNS"); do
  for t in all_reduce_perf sendrecv_perf alltoall_perf; do
    for tr in icn socket; do
      run "${tr}_${t}_r$r" $tr $t -b 8 -e 1G -f 4 -n 10 -w 3
    done
  done
done
device_checks_exit
