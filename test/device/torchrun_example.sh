#!/usr/bin/env bash
# The torchrun example (examples/torchrun/icn-torchrun.sh, unchanged) on a GPU machine as a two-node job: two
# emulated hosts (tools/testbed/icn-testbed), the script run once in each with NNODES=2, one GPU per node (with one
# GPU both nodes share it), the job key in a 0600 file, the tuner's agreement through the example's network
# rendezvous on node 0. Host names resolve through a hosts file bound over /etc/hosts
# inside each emulated host.
#   OUT=dir test/device/torchrun_example.sh PLUGIN_SO ICN_TOPO NETTOOLS_DIR
# Exit status 1 (with FAIL lines) when a node fails or errs, the example's check does not pass, NCCL did not load
# ICN, a connection did not cross to the other host, or the tuner's processes did not agree through the registry.
set -uo pipefail
PLUGIN=$(realpath "$1"); TOPO=$(realpath "$2"); TOOLS=$(realpath "$3")
OUT=${OUT:-/tmp/icn-torchrun}; mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
. "$here/checks.sh"
export IP="$TOOLS/ip" TC="$TOOLS/tc"
bed="$root/tools/testbed/icn-testbed"
name=icnt
trap '"$bed" down --name $name' EXIT
"$bed" up --name $name --hosts 2 --mtu 9000 || exit 1

# NCCL_NET_PLUGIN=icn finds libnccl-net-icn.so on the library path; icn-topo (the doctor) on PATH.
mkdir -p "$OUT/lib" "$OUT/bin"
cp "$PLUGIN" "$OUT/lib/libnccl-net-icn.so"
cp "$TOPO" "$OUT/bin/icn-topo"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$OUT/key"
chmod 600 "$OUT/key"
printf '127.0.0.1 localhost\n10.88.0.1 %s-h0\n10.88.0.2 %s-h1\n' $name $name > "$OUT/hosts"

pids=()
for node in 0 1; do
  "$bed" exec --name $name $node -- env NNODES=2 NODE_RANK=$node MASTER_ADDR=10.88.0.1 MASTER_PORT=29510 \
    GPUS_PER_NODE=1 ICN_AUTH_KEY_FILE="$OUT/key" NCCL_NVLS_ENABLE=0 \
    PATH="$OUT/bin:/opt/torch/.venv/bin:$PATH" LD_LIBRARY_PATH="$OUT/lib:${LD_LIBRARY_PATH:-}" \
    HOSTS="$OUT/hosts" EXAMPLE="$root/examples/torchrun/icn-torchrun.sh" \
    timeout 240 sh -c 'mount --bind "$HOSTS" /etc/hosts && exec bash "$EXAMPLE"' > "$OUT/node$node.log" 2>&1 &
  pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done

check_run "node 0" "${rcs[0]}" "$OUT/node0.log" --expect "all_reduce correct on 2 ranks" \
  --expect "Using network ICN" --expect "nNodes 2" --expect "ICN TCP send connection to $name-h1"
check_run "node 1" "${rcs[1]}" "$OUT/node1.log" --expect "Using network ICN" --expect "nNodes 2" \
  --expect "ICN TCP send connection to $name-h0"
# The tuner's agreement went through the registry (one process serves it, the other reaches it).
grep -h "serves the agreement registry" "$OUT"/node*.log | head -1 | grep -q . ||
  device_fail "tuner" "no process served the agreement registry"
grep -q "joined the agreement leader" "$OUT/node1.log" || device_fail "tuner" "node 1 never joined the agreement leader"
for n in 0 1; do
  grep -E "TUNING|tuner|doctor|ICN TCP send connection|Using network|nNodes|all_reduce correct" "$OUT/node$n.log" |
    sort | uniq -c | sort -rn | head -20 | sed "s/^/node$n: /"
done
device_checks_exit
