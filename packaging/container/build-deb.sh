#!/usr/bin/env bash
# Build stage of the cluster image: configures (without the test suites), builds and packages ICN as a .deb.
#   build-deb.sh [--install-deps] SOURCE_DIR BUILD_DIR OUT_DIR
# --install-deps first installs the build dependencies with apt (Debian/Ubuntu; the CUDA devel image).
# An existing BUILD_DIR is reused as configured (CI packages its own build tree this way).
set -euo pipefail
deps=0
if [ "${1:-}" = --install-deps ]; then deps=1; shift; fi
[ $# = 3 ] || { echo "usage: $0 [--install-deps] SOURCE_DIR BUILD_DIR OUT_DIR" >&2; exit 2; }
src=$1 build=$2 out=$3
if [ $deps = 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # dpkg-dev and file: cpack computes the package's dependencies with dpkg-shlibdeps.
  apt-get install -y -qq --no-install-recommends build-essential cmake pkg-config dpkg-dev file \
    libibverbs-dev libucx-dev libhwloc-dev >/dev/null
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICN_BUILD_TESTS=OFF
fi
cmake --build "$build" -j"$(nproc)"
mkdir -p "$out"
(cd "$build" && cpack -G DEB -B "$out/cpack" >/dev/null)
mv "$out"/cpack/*.deb "$out/"
rm -rf "$out/cpack"
ls "$out"/*.deb
