#!/bin/bash
# A multi-node PyTorch job with ICN as NCCL's network plugin: run this script once on every node.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 examples/torchrun/icn-torchrun.sh   (on node0)
#   NNODES=2 NODE_RANK=1 MASTER_ADDR=node0 examples/torchrun/icn-torchrun.sh   (on node1)
# torchrun starts one process per GPU; SCRIPT (default: allreduce_check.py next to this file) is the job.
set -euo pipefail
: "${NNODES:?number of nodes}" "${NODE_RANK:?rank of this node, 0..NNODES-1}" "${MASTER_ADDR:?address of node 0}"
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
MASTER_PORT=${MASTER_PORT:-29500}
SCRIPT=${SCRIPT:-$(dirname "$0")/allreduce_check.py}

# NCCL: load ICN (net plugin; its tuner and profiler come with it) and show its decisions.
export NCCL_NET_PLUGIN=icn
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING

# ICN settings (every ICN_* variable: `icn-params`); torchrun passes the environment to its workers.
export ICN_TRANSPORT=auto               # ib with an active RDMA port, else ICN's TCP transport
# export ICN_SOCKET_IFNAME=ens          # the handshake's interface (defaults to NCCL_SOCKET_IFNAME)
# A job key shared by every node: the same file (owner-readable only) on a shared file system, or one your
# scheduler distributes. Ranks prove they hold it before any transport resource exists.
export ICN_AUTH_KEY_FILE=${ICN_AUTH_KEY_FILE:-$HOME/.icn-key}
[ -s "$ICN_AUTH_KEY_FILE" ] || { echo "no job key in $ICN_AUTH_KEY_FILE (openssl rand -hex 32 > it, chmod 600)" >&2; exit 1; }
# The tuner's processes agree on every choice across nodes through a registry on node 0 (authenticated with the
# job key); without it, communicators spanning nodes keep NCCL's choices.
export ICN_TUNER_RENDEZVOUS=${ICN_TUNER_RENDEZVOUS:-tcp://$MASTER_ADDR:$((MASTER_PORT + 1))}

# The doctor, once per node before the workers start: the machine's rules, and this shell's CPU/memory
# binding, which torchrun's workers inherit. Findings are printed; make this fatal to refuse a bad node.
icn-topo doctor || echo "icn-topo doctor reported findings (above)"

exec torchrun --nnodes="$NNODES" --node-rank="$NODE_RANK" --nproc-per-node="$GPUS_PER_NODE" \
  --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" "$SCRIPT"
