# Guest checks that prove the rxe pair itself: verbs devices, an RC ping-pong, perftest write bandwidth and
# latency (baseline numbers for the plugin comparison). Sourced by /init; helpers: check, pair, result.
check ibv-devinfo 30 sh -c 'ibv_devinfo -l | grep -q rxe0 && ibv_devinfo -l | grep -q rxe1'
pair rc-pingpong 90 "ibv_rc_pingpong -d rxe0 -g 0 -n 100" "ibv_rc_pingpong -d rxe1 -g 0 -n 100 127.0.0.1"

# perftest prints a table; the data line starts with the message size.
perf_col() {  # perf_col LOG COLUMN
  awk -v c="$2" '$1 ~ /^[0-9]+$/ && NF >= c {v=$c} END {print v}' "$1"
}
for size in 65536 1048576; do
  pair "ib_write_bw-$size" 120 "ib_write_bw -d rxe0 -x 0 -s $size -n 200 -F" \
       "ib_write_bw -d rxe1 -x 0 -s $size -n 200 -F 127.0.0.1"
  result "ib_write_bw_MBps_$size" "$(perf_col /tmp/ib_write_bw-$size.client.log 4)"
done
pair ib_write_lat-65536 120 "ib_write_lat -d rxe0 -x 0 -s 65536 -n 200 -F" \
     "ib_write_lat -d rxe1 -x 0 -s 65536 -n 200 -F 127.0.0.1"
result ib_write_lat_us_65536 "$(perf_col /tmp/ib_write_lat-65536.client.log 6)"
