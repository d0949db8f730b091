# The ib transport between two processes over rxe0 <-> rxe1 (link-local GID index 0, chosen automatically),
# then the plugin's conformance suite (verbs, then UCX over rc_verbs) when this build has it.
export ICN_LOG_DETAIL=1
for q in 1 4; do
  rm -rf /tmp/p$q; mkdir -p /tmp/p$q
  pair ib-functional-qps$q 240 \
    "env ICN_IB_QPS_PER_CONNECTION=$q ib_pair --role b --dev 1 --dir /tmp/p$q" \
    "env ICN_IB_QPS_PER_CONNECTION=$q ib_pair --role a --dev 0 --dir /tmp/p$q"
done
rm -rf /tmp/dp; mkdir -p /tmp/dp
pair ib-dead-peer 120 "ib_pair --role b --dev 1 --dir /tmp/dp --case deadpeer" \
     "ib_pair --role a --dev 0 --dir /tmp/dp --case deadpeer"
grep -h 'dead peer' /tmp/ib-dead-peer.server.log || true
# HCA filter: only rxe1 is visible, so device 1 must not exist.
check ib-hca-filter 60 sh -c 'ICN_IB_HCA==rxe1 ib_pair --role a --dev 1 --dir /tmp/none 2>&1 | grep -q "device 1 of 1"'

if [ -x /opt/icn/bin/icn-conformance ]; then
  # One process forks both ranks; each rank gets its own rxe device through ICN_CONF_RANK<n>_ENV.
  export ICN_PLUGIN_PATH=/opt/icn/lib/libnccl-net-icn.so UCX_WARN_UNUSED_ENV_VARS=n
  check conformance-ib 400 env ICN_TRANSPORT=ib ICN_CONF_RANK0_ENV="ICN_IB_HCA==rxe0" \
    ICN_CONF_RANK1_ENV="ICN_IB_HCA==rxe1" icn-conformance
  check conformance-ucx-rc 400 env ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux UCX_IB_GID_INDEX=0 \
    ICN_COPY_THREADS=0 ICN_CONF_RANK0_ENV="UCX_NET_DEVICES=rxe0:1" ICN_CONF_RANK1_ENV="UCX_NET_DEVICES=rxe1:1" \
    icn-conformance
  for f in /tmp/conformance-ib.log /tmp/conformance-ucx-rc.log; do
    grep -E '^\[ *(OK|FAILED) ' "$f" | sed "s|^|${f##*/}: |"
    # Failure details (assertion text and the plugin's warnings) for the console.
    grep -E -A4 'Failure$' "$f" | head -n 120
  done
else
  fail "conformance suite not built (target icn-conformance missing)"
fi
