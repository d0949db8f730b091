#!/usr/bin/env bash
# Gathers what test/device/straggler_proof.sh needs on the GPU machine into DIR (a folder that travels there): the
# scripts it runs (test/device, the testbed), the plugin and the plugin before the diagnosis hooks (stripped), the
# driver, icn-cluster-bench, icn-hang and the carried network tools.
#   [PLUGIN_SO=other.so] test/device/straggler_stage.sh DIR BUILD_DIR BEFORE_PLUGIN_SO
# Then, there: OUT=out DIR/test/device/straggler_proof.sh DIR/bin/libnccl-net-icn.so DIR/nettools
#   DIR/bin/icn-straggler-driver DIR/bin/icn-hang DIR/bin/icn-cluster-bench DIR/bin/libnccl-net-icn-before.so
set -euo pipefail
dir=$1 build=$2 before=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir"
mkdir -p "$dir/test/device" "$dir/tools/testbed" "$dir/bin"
cp "$src"/test/device/{straggler_proof.sh,straggler_tool.py,checks.sh} "$dir/test/device/"
cp "$src/tools/testbed/icn-testbed" "$dir/tools/testbed/"
strip --strip-debug -o "$dir/bin/libnccl-net-icn.so" "${PLUGIN_SO:-$build/plugin/libnccl-net-icn.so}"
strip --strip-debug -o "$dir/bin/libnccl-net-icn-before.so" "$before"
for b in test/device/icn-straggler-driver test/device/icn-cluster-bench tools/hang/icn-hang; do
  strip --strip-debug -o "$dir/bin/$(basename "$b")" "$build/$b"
done
"$src/test/device/carry_net_tools.sh" "$dir/nettools" >/dev/null
du -sh "$dir"
