#!/usr/bin/env bash
# Shared by the package tests: a minimal Debian 12 root (debootstrap minbase + libstdc++6), built once into
# CACHE_DIR/debian12-minbase and reused. Prints the root's path. Call with CACHE_DIR/.lock held (flock).
#   minroot.sh CACHE_DIR
set -euo pipefail
cache=$1
base=$cache/debian12-minbase
if [ ! -f "$base/.complete" ]; then
  t0=$(date +%s)
  # The mirror: the first Debian URI apt is configured with (deb822 or one-line sources).
  mirror=$(grep -hoE '(URIs:|^deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/* /etc/apt/sources.list \
    2>/dev/null | grep -oE 'https?://[^ ]+' | head -n1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  rm -rf --one-file-system "$base" "$base.tmp"
  echo "debootstrap --variant=minbase --include=libstdc++6 bookworm from $mirror" >&2
  if ! debootstrap --variant=minbase --include=libstdc++6 bookworm "$base.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    tail -n 20 "$cache/debootstrap.log" >&2; echo "FAIL: debootstrap" >&2; exit 1
  fi
  touch "$base.tmp/.complete"
  mv "$base.tmp" "$base"
  echo "root built in $(( $(date +%s) - t0 )) s" >&2
fi
echo "$base"
