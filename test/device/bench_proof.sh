#!/usr/bin/env bash
# GPU proof for the benchmark tooling (2x H200, one host). Run from the repository root:
#   test/device/bench_proof.sh <icn-build-dir> <nccl-tests-build-dir> <probes-dir>
#     <icn-build-dir>         holds libnccl-net-icn.so (searched recursively)
#     <nccl-tests-build-dir>  nccl-tests v2.19.6 + nccl-tests-patches, built (…/build with *_perf)
#     <probes-dir>            icn-nvlink-bw and icn-numa-bw
# Runs, single process with -g 2 and NCCL_NVLS_ENABLE=0:
#   A) over NVLink (NCCL default): the stock collectives, mixed_traffic_perf at its full default
#      scale (100 MiB-1 GiB broadcasts, 4 GiB burst) and moe_alltoallv_perf, all data-checked,
#      plus icn-nvlink-bw and icn-numa-bw;
#   B) over the network path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): NCCL Socket, ICN, ICN with
#      its tuner off - same tests, scaled down to fit the time budget;
#   C) icn-bench-report build -> $OUT: report.md, busbw.png, latency.png, mixed.png, moe.png,
#      results.json, plus bench_proof.log (7 files). Raw per-run files stay in a scratch folder.
# Exit status: 0 when every run passed its data check, 1 otherwise, 2 on bad arguments.
set -uo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 <icn-build-dir> <nccl-tests-build-dir> <probes-dir>" >&2
  exit 2
fi
icn_dir="$1"; nt_dir="$2"; probes="$3"
OUT="${OUT:-$PWD/bench-proof-out}"
mkdir -p "$OUT"
log="$OUT/bench_proof.log"
: > "$log"
say() { echo "$*" | tee -a "$log"; }

plugin="$(find "$icn_dir" -name libnccl-net-icn.so -print -quit 2>/dev/null)"
[[ -n "$plugin" ]] || { say "no libnccl-net-icn.so under $icn_dir"; exit 2; }
plugin="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"
for b in all_reduce_perf alltoall_perf sendrecv_perf mixed_traffic_perf moe_alltoallv_perf; do
  [[ -x "$nt_dir/$b" ]] || { say "missing $nt_dir/$b (build nccl-tests with nccl-tests-patches applied)"; exit 2; }
done
for b in icn-nvlink-bw icn-numa-bw; do
  [[ -x "$probes/$b" ]] || { say "missing $probes/$b"; exit 2; }
done
report="$(cd "$(dirname "$0")/../.." && pwd)/tools/report/icn-bench-report"

export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
scratch="$(mktemp -d /tmp/bench-proof.XXXXXX)"
start=$(date +%s)

say "# bench_proof: plugin $plugin"
say "# nccl-tests: $nt_dir   probes: $probes   scratch: $scratch"
{ nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader; nvidia-smi topo -m; } >> "$log" 2>&1 || true

# A) NVLink, NCCL default, full-scale mixed traffic; probes.
say "## A: NVLink (nccl-default) + probes"
timeout 200 python3 "$report" run --nccl-tests "$nt_dir" --probes "$probes" --out "$scratch/a" --raw "$scratch/raw-nvlink" \
  --variants nccl-default --tests all_reduce,all_gather,reduce_scatter,alltoall,sendrecv,mixed_traffic,moe_alltoallv \
  --ngpus 2 --minbytes 8 --maxbytes 256M --iters 20 --warmup 5 --moe-minbytes 1M --moe-maxbytes 256M \
  --moe-args "--zipf 2.0 --topk 1 --experts_per_rank 8" --nvlink-args "--size 256M --iters 20" \
  --numa-args "--size 256M --iters 10" --timeout 90 2>&1 | tee -a "$log"
say "A finished after $(( $(date +%s) - start )) s"

# B) The network path on one host: NCCL Socket vs ICN (tuner on/off), scaled down.
say "## B: network path (P2P/SHM off): nccl-socket, icn, icn-tuner-off"
timeout 260 python3 "$report" run --nccl-tests "$nt_dir" --plugin "$plugin" --out "$scratch/b" --raw "$scratch/raw-net" \
  --variants nccl-socket,icn,icn-tuner-off --tests all_reduce,alltoall,sendrecv,mixed_traffic,moe_alltoallv \
  --ngpus 2 --minbytes 8 --maxbytes 64M --iters 10 --warmup 2 --moe-minbytes 1M --moe-maxbytes 64M \
  --moe-args "--zipf 2.0 --topk 1 --experts_per_rank 8" \
  --mixed-args "--small_ops 64 --bcast_min 64M --bcast_max 256M --bcast_ops 3 --burst_bytes 1G --burst_chunk 256M --rounds 2 --op_timeout 60" \
  --timeout 60 2>&1 | tee -a "$log"
say "B finished after $(( $(date +%s) - start )) s"

# C) One report from both raw folders.
say "## C: report"
python3 "$report" build "$scratch/raw-nvlink" "$scratch/raw-net" --out "$OUT" --title "ICN benchmarks on 2x H200" --strict 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}

# Key lines for the log: per-run status and the NVLink comparison.
{
  echo "## summary (from report.md)"
  sed -n '/^## Summary/,/^## Setup/p' "$OUT/report.md" | grep '^|' || true
  grep -E 'NV[0-9]+ x' "$OUT/report.md" || true
  for f in "$scratch"/raw-*/*.log; do
    if grep -qiE 'Test (CUDA|NCCL) failure|NCCL WARN|timeout|Segmentation' "$f"; then
      echo "### $(basename "$f")"; grep -iE 'failure|WARN|timeout|Segmentation' "$f" | head -8
    fi
  done
} >> "$log" 2>&1
say "bench_proof: done after $(( $(date +%s) - start )) s, report rc=$rc; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
rm -rf "$scratch"
exit $(( rc == 0 ? 0 : 1 ))
