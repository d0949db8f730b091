#!/usr/bin/env bash
# What `cmake --install` puts on a machine: every ELF needs glibc 2.35 at most (Ubuntu 22.04 and the
# images built on it), no file names the source or build tree, pkg-config and find_package(ICN) both
# find the plugin, the license ships with it, and the plugin links neither UCX nor libibverbs (opened at
# run time).
#   check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1"); src=$(realpath "$2")
root=$(mktemp -d /tmp/icn-install.XXXXXX)
trap 'rm -rf "$root"' EXIT
DESTDIR="$root" cmake --install "$build" --prefix /usr --strip >/dev/null
fail=0
max_allowed=2.35
while IFS= read -r f; do
  head -c 4 "$f" | grep -q $'\x7fELF' || continue
  v=$(objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n1)
  if [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$v" "$max_allowed" | sort -V | tail -n1)" != "$max_allowed" ]; then
    echo "FAIL: ${f#$root} needs GLIBC_$v (> $max_allowed):"
    objdump -T "$f" | grep "GLIBC_$v" | head -5
    fail=1
  fi
  printf '%-40s GLIBC_%s\n' "${f#$root}" "${v:-none}"
done < <(find "$root" -type f)
# The plugin opens libibverbs and UCX at run time: neither may be a link-time dependency (a host without one
# of them must still load the plugin and use the transports it has).
so=$(find "$root" -name libnccl-net-icn.so -type f | head -n1)
if [ -z "$so" ]; then
  echo "FAIL: libnccl-net-icn.so not installed"; fail=1
else
  needed=$(readelf -d "$so" | awk '/NEEDED/ {print $NF}' | tr -d '[]' | tr '\n' ' ')
  echo "plugin NEEDED: $needed"
  if echo "$needed" | grep -qE 'lib(ucp|uct|ucs|ucm|ibverbs|rdmacm|hwloc)\.'; then
    echo "FAIL: the plugin links a transport library at load time: $needed"; fail=1
  fi
  if ldd "$so" | grep -E 'lib(ucp|uct|ucs|ucm|ibverbs|rdmacm|hwloc)\.'; then
    echo "FAIL: ldd shows a transport library loaded with the plugin"; fail=1
  fi
fi
for p in "$src" "$build"; do
  if hits=$(grep -rlF "$p" "$root"); then
    echo "FAIL: installed files name $p:"; echo "$hits" | sed "s|$root||"; fail=1
  fi
done
plugin=$(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig:$root/usr/lib/x86_64-linux-gnu/pkgconfig" \
  pkg-config --variable=plugin icn) || { echo "FAIL: pkg-config cannot find icn"; fail=1; }
[ -f "$plugin" ] || { echo "FAIL: pkg-config's plugin path $plugin does not exist"; fail=1; }
echo "pkg-config plugin: ${plugin#$root}"
proj=$(mktemp -d /tmp/icn-findpkg.XXXXXX)
cat > "$proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer NONE)
find_package(ICN 0.1 REQUIRED)
if(NOT EXISTS "${ICN_PLUGIN}" OR NOT TARGET ICN::nccl-net-icn)
  message(FATAL_ERROR "ICN package config incomplete: ${ICN_PLUGIN}")
endif()
message(STATUS "ICN_PLUGIN=${ICN_PLUGIN}")
CM
cmake -S "$proj" -B "$proj/b" -DCMAKE_PREFIX_PATH="$root/usr" 2>&1 | grep -E "ICN_PLUGIN|Error" || { echo "FAIL: find_package(ICN)"; fail=1; }
rm -rf "$proj"
[ -f "$root/usr/share/doc/icn-nccl-plugin/copyright" ] && [ -f "$root/usr/share/doc/icn-nccl-plugin/LICENSE" ] ||
  { echo "FAIL: license/copyright not installed"; fail=1; }
echo "installed files: $(find "$root" -type f | wc -l)"
exit $fail
