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

if [ -x /opt/icn/bin/icn_conformance ]; then
  lib=/opt/icn/lib/libnccl-net-icn.so
  rm -rf /tmp/c1; mkdir -p /tmp/c1
  pair conformance-ib 300 "env ICN_TRANSPORT=ib icn_conformance --plugin $lib --rank 1 --dir /tmp/c1" \
       "env ICN_TRANSPORT=ib icn_conformance --plugin $lib --rank 0 --dir /tmp/c1"
  rm -rf /tmp/c2; mkdir -p /tmp/c2
  pair conformance-ucx-rc 300 \
    "env ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux UCX_IB_GID_INDEX=0 UCX_NET_DEVICES=rxe1:1 icn_conformance --plugin $lib --rank 1 --dir /tmp/c2" \
    "env ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux UCX_IB_GID_INDEX=0 UCX_NET_DEVICES=rxe0:1 icn_conformance --plugin $lib --rank 0 --dir /tmp/c2"
fi
