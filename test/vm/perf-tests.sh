# perftest vs the ib transport on the same rxe pair: bandwidth at 64 KiB and 1 MiB, latency at 64 KiB.
# Ratios go to the results file; ICN_VM_PERF_ENFORCE=1 (host env, passed through --env) turns the targets
# (>= 0.8x bandwidth, <= 1.5x latency) into checks.
perf_col() { awk -v c="$2" '$1 ~ /^[0-9]+$/ && NF >= c {v=$c} END {print v}' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
for size in 65536 1048576; do
  pair "ib_write_bw-$size" 120 "ib_write_bw -d rxe0 -x 0 -s $size -n 400 -F" \
       "ib_write_bw -d rxe1 -x 0 -s $size -n 400 -F 127.0.0.1"
  ref=$(perf_col /tmp/ib_write_bw-$size.client.log 4)
  rm -rf /tmp/bw; mkdir -p /tmp/bw
  pair "ib_pair-bw-$size" 180 "ib_pair --role b --dev 1 --dir /tmp/bw --case bw --size $size --iters 400" \
       "ib_pair --role a --dev 0 --dir /tmp/bw --case bw --size $size --iters 400"
  ours=$(sed -n "s/^RESULT ib_pair_bw_MBps_$size=//p" /tmp/ib_pair-bw-$size.client.log)
  result "ib_write_bw_MBps_$size" "$ref"
  result "icn_ib_bw_MBps_$size" "$ours"
  r=$(ratio "$ours" "$ref"); result "bw_ratio_$size" "$r"
  if [ "${ICN_VM_PERF_ENFORCE:-0}" = 1 ]; then
    awk -v r="$r" 'BEGIN { exit !(r >= 0.8) }' && pass "bw-ratio-$size $r" || fail "bw-ratio-$size $r < 0.8"
  fi
done
pair ib_write_lat-65536 120 "ib_write_lat -d rxe0 -x 0 -s 65536 -n 300 -F" \
     "ib_write_lat -d rxe1 -x 0 -s 65536 -n 300 -F 127.0.0.1"
ref=$(perf_col /tmp/ib_write_lat-65536.client.log 6)
rm -rf /tmp/lat; mkdir -p /tmp/lat
pair ib_pair-lat-65536 180 "ib_pair --role b --dev 1 --dir /tmp/lat --case lat --size 65536 --iters 300" \
     "ib_pair --role a --dev 0 --dir /tmp/lat --case lat --size 65536 --iters 300"
ours=$(sed -n 's/^RESULT ib_pair_lat_us_65536=//p' /tmp/ib_pair-lat-65536.client.log)
result ib_write_lat_us_65536 "$ref"
result icn_ib_lat_us_65536 "$ours"
r=$(ratio "$ours" "$ref"); result lat_ratio_65536 "$r"
if [ "${ICN_VM_PERF_ENFORCE:-0}" = 1 ]; then
  awk -v r="$r" 'BEGIN { exit !(r <= 1.5) }' && pass "lat-ratio $r" || fail "lat-ratio $r > 1.5"
fi
