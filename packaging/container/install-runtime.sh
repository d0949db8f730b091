#!/usr/bin/env bash
# Runtime stage of the cluster image: installs ICN's .deb with libibverbs (and its providers) and UCX, so every
# transport is available, then checks the plugin loads and moves data between two processes.
#   install-runtime.sh DIR    (DIR holds the .deb built by build-deb.sh)
set -euo pipefail
[ $# = 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive
debs=("$1"/icn-nccl-plugin_*.deb)
deb=${debs[0]}
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$deb" libibverbs1 ibverbs-providers libucx0 >/dev/null
rm -rf /var/lib/apt/lists/*
# The installed plugin through NCCL's C ABI: init, one transfer between two processes (ICN's TCP transport).
NCCL_DEBUG=INFO icn-perf --min 64K --max 64K --window 8 --lat-iters 20 2>&1 | grep -E "transports available|bytes|65536"
icn-params >/dev/null
