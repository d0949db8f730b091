# Pass/fail rules shared by the GPU scripts in test/device (sourced, not run). A run fails when it exits non-zero
# (124: timed out), when its log holds an error (an NCCL WARN not listed as benign below, an NCCL or CUDA failure,
# a crash, a Python traceback, a sanitizer report), when nccl-tests counted wrong elements or its data check did
# not pass, when expected result rows are missing, or when a line that proves discovery (e.g. "Using network ICN")
# is absent. Each failure prints "FAIL <label>: <reason>" on stderr and counts in DEVICE_FAILS; a script ends with
# device_checks_exit, which exits 1 when anything failed. test/device/test_checks.sh feeds these recorded good
# logs and broken variants of them.

DEVICE_FAILS=${DEVICE_FAILS:-0}

# Lines that mean a run went wrong, whatever its exit code said.
DEVICE_ERROR_RE='NCCL WARN|Test (NCCL|CUDA) failure|NCCL failure|NCCL error|Cuda failure|CUDA error|unhandled (system|cuda|internal) error|Segmentation fault|Bus error|Aborted|core dumped|Caught signal|terminate called|Traceback \(most recent call last\)|[A-Za-z]+Sanitizer|Out of bounds values : [1-9]'
# NCCL WARN lines that are notices, not failures (one alternative each, with its reason):
# - ICN chose its UCX or TCP transport because the machine has no RDMA port (the GPU machines have none).
DEVICE_BENIGN_RE='NCCL WARN ICN no usable RDMA port .*falling back to the (UCX|TCP) transport'

device_fail() {  # label, reason...
  local label=$1; shift
  echo "FAIL $label: $*" >&2
  DEVICE_FAILS=$((DEVICE_FAILS + 1))
}

# Prints up to 3 error lines of LOG (benign ones left out); status 0 when there is one.
device_log_errors() {
  local found
  found=$(grep -aE "$DEVICE_ERROR_RE" "$1" 2>/dev/null | grep -avE "$DEVICE_BENIGN_RE" | head -3)
  [ -n "$found" ] && printf '%s\n' "$found"
}

# nccl-tests result rows (size count type redop root, then out-of-place and in-place time algbw busbw #wrong)
# whose #wrong is neither 0 nor N/A; prints them.
device_wrong_rows() {
  awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 13 && (($9 != "0" && $9 != "N/A") || ($13 != "0" && $13 != "N/A"))' "$1"
}

# check_run LABEL RC LOG [--rows] [--data] [--expect REGEX]...
#   --rows    the log must hold nccl-tests result rows
#   --data    nccl-tests' data check must have run and passed ("Out of bounds values : 0 OK", no #wrong)
#   --expect  a line matching REGEX must be present (discovery: the plugin, tuner or transport was used)
# Status 0 when the run passed; otherwise each reason is printed and counted.
check_run() {
  local label=$1 rc=$2 log=$3 rows=0 data=0 bad=0 errs wrong
  local expect=()
  shift 3
  while [ $# -gt 0 ]; do
    case $1 in
      --rows) rows=1 ;;
      --data) data=1; rows=1 ;;
      --expect) expect+=("$2"); shift ;;
      *) echo "check_run: unknown option $1" >&2; return 2 ;;
    esac
    shift
  done
  if [ ! -s "$log" ]; then
    device_fail "$label" "no output (missing or empty $log)"
    return 1
  fi
  if [ "$rc" != 0 ]; then
    case $rc in
      124) device_fail "$label" "timed out (rc 124)" ;;
      13[0-9]|1[4-9][0-9]) device_fail "$label" "killed by signal $((rc - 128)) (rc $rc)" ;;
      *) device_fail "$label" "exited with rc $rc" ;;
    esac
    bad=1
  fi
  if errs=$(device_log_errors "$log"); then
    device_fail "$label" "error in $(basename "$log"): $(printf '%s' "$errs" | head -1)"
    bad=1
  fi
  if [ $rows = 1 ] && ! awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 9 {found=1} END {exit !found}' "$log"; then
    device_fail "$label" "no nccl-tests result rows in $(basename "$log")"
    bad=1
  fi
  if [ $data = 1 ]; then
    wrong=$(device_wrong_rows "$log")
    if [ -n "$wrong" ]; then
      device_fail "$label" "wrong elements in $(printf '%s\n' "$wrong" | wc -l) result rows, first: $(printf '%s' "$wrong" | head -1 | tr -s ' ')"
      bad=1
    elif ! grep -aq "Out of bounds values : 0 OK" "$log"; then
      device_fail "$label" "data check did not report 'Out of bounds values : 0 OK'"
      bad=1
    fi
  fi
  local re
  for re in "${expect[@]}"; do
    if ! grep -aqE "$re" "$log"; then
      device_fail "$label" "missing '$re' in $(basename "$log")"
      bad=1
    fi
  done
  return $bad
}

# Ends a script: a one-line verdict, exit 1 when any check failed.
device_checks_exit() {
  if [ "$DEVICE_FAILS" -gt 0 ]; then
    echo "device checks: $DEVICE_FAILS failure(s) (FAIL lines above)" >&2
    exit 1
  fi
  echo "device checks: all passed"
  exit 0
}

# Stops the MPS daemon and waits (up to 10 s) until it is gone, so that a proof run right after can start its own.
device_mps_quit() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  for _ in $(seq 1 50); do pgrep -f '^nvidia-cuda-mps-control' >/dev/null || return 0; sleep 0.2; done
}

# Puts NCCL from the Python environment (or CUDA's) on LD_LIBRARY_PATH when BIN does not find one (the device
# programs link their CUDA runtime in, not NCCL), and points CUDA MPS at this suite's pipe and log directories.
device_nccl_and_mps_env() {
  local lib
  if ldd "$1" 2>/dev/null | grep -q 'libnccl.so.2 => not found'; then
    lib=$(find /opt/torch/.venv /usr/local/cuda /usr/lib -name libnccl.so.2 2>/dev/null | head -1)
    if [ -n "$lib" ]; then
      LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      export LD_LIBRARY_PATH
    fi
  fi
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/icn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/icn-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
}
