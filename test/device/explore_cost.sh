#!/usr/bin/env bash
# What exploration costs a short run, on 2 GPUs: all_reduce 8 MiB..1 GiB (-n 20 -w 5) with ICN as users get it
# (tuner on: every size is still exploring), ICN with the tuner off, and on the net path NCCL Socket; rounds
# interleaved; busbw per size and run in $OUT/explore-<path>-<config>-r<round>.txt, medians in $OUT/explore_cost.md.
# A diagnostic tuner-on run per path keeps the TUNING log (which arms each size explored or skipped).
#   test/device/explore_cost.sh <libnccl-net-icn.so> <nccl-tests build dir> [rounds]
#   ICN_EXPLORE_PATHS="net nvl" (default net): net = NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; nvl = NVLink.
# Exit status 1 when a run failed, erred or counted wrong elements, or the diagnostic run shows no ICN tuner
# (test/device/checks.sh); every reason is printed as a FAIL line.
set -u
. "$(dirname "$0")/checks.sh"
SO=$(readlink -f "$1"); NT=$2; ROUNDS=${3:-2}
OUT=${OUT:-$PWD/explore-cost}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
ARGS="-g 2 -b 8M -e 1G -f 8 -n 20 -w 5 -c 1"
for path in ${ICN_EXPLORE_PATHS:-net}; do
  if [ "$path" = net ]; then env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1); else env=(); fi
  for r in $(seq 1 "$ROUNDS"); do
    env "${env[@]}" NCCL_NET_PLUGIN="$SO" timeout 200 "$NT/all_reduce_perf" $ARGS > "$OUT/explore-$path-icn-r$r.txt" 2>&1
    check_run "$path icn r$r" $? "$OUT/explore-$path-icn-r$r.txt" --data
    env "${env[@]}" NCCL_NET_PLUGIN="$SO" ICN_TUNER=off timeout 200 "$NT/all_reduce_perf" $ARGS \
      > "$OUT/explore-$path-icn-off-r$r.txt" 2>&1
    check_run "$path icn-off r$r" $? "$OUT/explore-$path-icn-off-r$r.txt" --data
    if [ "$path" = net ]; then
      env "${env[@]}" NCCL_NET_PLUGIN=none NCCL_NET=Socket timeout 200 "$NT/all_reduce_perf" $ARGS \
        > "$OUT/explore-$path-socket-r$r.txt" 2>&1
      check_run "$path socket r$r" $? "$OUT/explore-$path-socket-r$r.txt" --data
    fi
  done
  env "${env[@]}" NCCL_NET_PLUGIN="$SO" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 200 "$NT/all_reduce_perf" $ARGS \
    > "$OUT/explore-$path-diag.log" 2>&1
  check_run "$path diag" $? "$OUT/explore-$path-diag.log" --data --expect "ICN tuner: comm"
done
for f in "$OUT"/explore-*-r*.txt; do
  printf '%-26s' "$(basename "$f" .txt)"
  awk '$1 ~ /^[0-9]+$/ && NF > 10 {printf " %s:%s(%s)", $1, $8, $9} /wrong|Out of bounds/ {w=$0} END {print "  " w}' "$f"
done
# Median busbw (out-of-place) per path, configuration and size.
{
  echo "| path | config | size (B) | busbw GB/s, median | runs |"
  echo "|---|---|---|---|---|"
  for f in "$OUT"/explore-*-r*.txt; do
    b=$(basename "$f" .txt); b=${b#explore-}; b=${b%-r*}
    awk -v k="$b" '$1 ~ /^[0-9]+$/ && NF > 10 {print k, $1, $8}' "$f"
  done | sort -k1,1 -k2,2n -k3,3g | awk '
    function flush() { if (n) { m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
                       split(key, kk, " "); split(kk[1], pc, "-"); cfg = substr(kk[1], length(pc[1]) + 2)
                       printf "| %s | %s | %s | %.2f | %d |\n", pc[1], cfg, kk[2], m, n } n = 0 }
    { k = $1 " " $2; if (k != key) { flush(); key = k } v[++n] = $3 }
    END { flush() }'
} > "$OUT/explore_cost.md"
cat "$OUT/explore_cost.md"
device_checks_exit
