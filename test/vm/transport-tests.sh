# The ib transport between two processes over rxe0 <-> rxe1 (link-local GID index 0, chosen automatically),
# then the plugin's conformance suite over verbs.
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
# The diagnosis over verbs: a receive waiting for its bytes and a send for its clear-to-send, both in b's hang
# report, then resumed.
rm -rf /tmp/hw /tmp/hw-a /tmp/hw-b; mkdir -p /tmp/hw; mkdir -m 700 /tmp/hw-a /tmp/hw-b
pair ib-hang-report 90 \
  "env ICN_HANG_REPORT_S=1 ICN_HANG_REPORT_DIR=/tmp/hw-b ib_pair --role b --dev 1 --dir /tmp/hw --case waits" \
  "env ICN_HANG_REPORT_S=1 ICN_HANG_REPORT_DIR=/tmp/hw-a ib_pair --role a --dev 0 --dir /tmp/hw --case waits"
# HCA filter: only rxe1 is visible, so device 1 must not exist.
check ib-hca-filter 60 sh -c 'ICN_IB_HCA==rxe1 ib_pair --role a --dev 1 --dir /tmp/none 2>&1 | grep -q "device 1 of 1"'

# The plugin's conformance suite (one process forks both ranks; each rank gets its own rxe device through
# ICN_CONF_RANK<n>_ENV), with the verbs transport.
conformance conformance-ib "*" ICN_TRANSPORT=ib ICN_CONF_RANK0_ENV="ICN_IB_HCA==rxe0" ICN_CONF_RANK1_ENV="ICN_IB_HCA==rxe1"
# Abi.IbMakeVDeviceThroughTheCAbi above must have taken its RDMA branch here: both rxe devices fused into one.
check ib-makevdevice-fused 10 grep -q "ib makeVDevice: rxe0+rxe1 " /tmp/conformance-ib.log
