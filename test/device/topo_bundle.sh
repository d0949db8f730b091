#!/usr/bin/env bash
# Copies what test/device/topo_proof.sh needs out of a build tree into a small folder to carry to the GPU
# machine (debug info stripped): DEST/topo/icn-topo, DEST/shim/lib{icn-shim,nccl-env-icn}.so,
# DEST/topo-runtime/libhwloc.so.15. Usage: test/device/topo_bundle.sh BUILD_DIR DEST (e.g. .carry/topo-proof)
set -eu
BUILD=${1:?usage: $0 BUILD_DIR DEST}
DEST=${2:?usage: $0 BUILD_DIR DEST}
mkdir -p "$DEST/topo" "$DEST/shim" "$DEST/topo-runtime"
install -m 755 "$BUILD/topo/icn-topo" "$DEST/topo/"
install -m 755 "$BUILD/shim/libicn-shim.so" "$BUILD/shim/libnccl-env-icn.so" "$DEST/shim/"
if [ -e "$BUILD/topo-runtime/libhwloc.so.15" ]; then install -m 644 "$BUILD/topo-runtime/libhwloc.so.15" "$DEST/topo-runtime/"; fi
strip --strip-debug "$DEST/topo/icn-topo" "$DEST"/shim/*.so
du -sh "$DEST"
