#!/usr/bin/env bash
# Gathers what the one-GPU cluster proofs (test/device/straggler_proof.sh, multirail_proof.sh) need on the GPU
# machine into DIR (a folder that travels there): the scripts they run (test/device, the testbed), the plugin
# (stripped), the drivers, icn-cluster-bench, icn-hang and the carried network tools; with BEFORE_PLUGIN_SO also a
# second plugin for straggler_proof.sh's cost case.
#   [PLUGIN_SO=other.so] test/device/stage.sh DIR BUILD_DIR [BEFORE_PLUGIN_SO]
# Then, there, e.g.: OUT=out DIR/test/device/multirail_proof.sh DIR/bin/libnccl-net-icn.so DIR/nettools
#   DIR/bin/icn-cluster-bench DIR/bin/icn-straggler-driver
set -euo pipefail
dir=$1 build=$2 before=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir"
mkdir -p "$dir/test/device" "$dir/tools/testbed" "$dir/bin"
cp "$src"/test/device/{straggler_proof.sh,straggler_tool.py,multirail_proof.sh,multirail_summary.py,checks.sh} \
  "$dir/test/device/"
cp "$src/tools/testbed/icn-testbed" "$dir/tools/testbed/"
strip --strip-debug -o "$dir/bin/libnccl-net-icn.so" "${PLUGIN_SO:-$build/plugin/libnccl-net-icn.so}"
[ -z "$before" ] || strip --strip-debug -o "$dir/bin/libnccl-net-icn-before.so" "$before"
for b in test/device/icn-straggler-driver test/device/icn-cluster-bench tools/hang/icn-hang; do
  strip --strip-debug -o "$dir/bin/$(basename "$b")" "$build/$b"
done
"$src/test/device/carry_net_tools.sh" "$dir/nettools" >/dev/null
du -sh "$dir"
