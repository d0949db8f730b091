#!/usr/bin/env bash
# The installed plugin in a minimal Debian 12 root (debootstrap minbase + libstdc++6), in three variants:
#   none  neither UCX nor libibverbs
#   ib    libibverbs (Debian's libibverbs1 package), no UCX
#   ucx   UCX (Debian's libucx0 package), no libibverbs
# In each, icn-perf loads the plugin through NCCL's C ABI and asserts: init succeeds, the INFO line names
# the transports available and why the others are not, ICN_TRANSPORT=auto picks ICN's TCP transport and a
# transfer between two processes succeeds; asking for a missing transport fails init with a WARN naming
# the missing library. The ucx variant also moves data over UCX (its IB modules cannot load there).
#   rootfs_test.sh BUILD_DIR [CACHE_DIR]    exit 77 (skipped) without root, debootstrap, chroot or unshare
# The root and the packages are cached in CACHE_DIR (default BUILD_DIR/rootfs-cache): only the first run
# downloads (debootstrap from the mirror in /etc/apt's sources, then apt-get download).
set -euo pipefail
build=$(realpath "$1")
cache=${2:-$build/rootfs-cache}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (chroot, mount namespace)"
for t in debootstrap chroot unshare dpkg-deb apt-get; do command -v "$t" >/dev/null || skip "no $t"; done
unshare -m true 2>/dev/null || skip "cannot create a mount namespace"

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
t0=$(date +%s)

base=$("$(dirname "$0")/minroot.sh" "$cache")
# The base must really lack both libraries, or the variants prove nothing.
if find "$base" -name 'libibverbs.so*' -o -name 'libucp.so*' | grep -q .; then
  echo "FAIL: the minimal root already has libibverbs or UCX"; exit 1
fi

# Debian's packages for the variants, with their own dependencies except each other.
debs=$cache/debs
ib_pkgs="libibverbs1 libnl-3-200 libnl-route-3-200"
ucx_pkgs="libucx0 libnuma1"
dl_opts="-o APT::Sandbox::User=root"  # the cache may sit where apt's download user cannot write
if [ ! -f "$debs/.complete" ]; then
  rm -rf "$debs"; mkdir -p "$debs/ib" "$debs/ucx"
  (cd "$debs/ib" && apt-get download -qq $dl_opts $ib_pkgs) &&
    (cd "$debs/ucx" && apt-get download -qq $dl_opts $ucx_pkgs) ||
    { echo "FAIL: apt-get download"; exit 1; }
  touch "$debs/.complete"
fi

work=$(mktemp -d "$cache/run.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
DESTDIR="$work/icn" cmake --install "$build" --prefix /usr >/dev/null
plugin_rel=$(cd "$work/icn" && find . -name libnccl-net-icn.so -type f | head -n1 | sed 's|^\.||')
[ -n "$plugin_rel" ] || { echo "FAIL: install has no plugin"; exit 1; }

fail=0
# Runs a command in the variant's root: its own mount namespace, /proc, /sys and /dev from the host (the
# network namespace is the host's, as in a container with host networking).
inroot() {
  local root=$1; shift
  unshare -m -- sh -c 'r=$1; shift
    mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" && mount --rbind /dev "$r/dev" &&
    exec chroot "$r" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root "$@"' sh "$root" "$@"
}
expect() {  # expect VARIANT LOG REGEX WHAT
  if grep -qE "$3" "$2"; then echo "  ok: $4"; else echo "  FAIL ($1): $4: no line matching /$3/"; fail=1; fi
}
perf="/usr/bin/icn-perf --plugin $plugin_rel --min 64K --max 64K --window 8 --lat-iters 20"

for variant in none ib ucx; do
  tv=$(date +%s)
  root=$work/$variant
  cp -al "$base" "$root"  # hard links: the cached base is never written (every file below is new)
  cp -a "$work/icn/." "$root/"
  # As dpkg unpacks on a merged-/usr system: a package's /lib goes through the root's /lib -> usr/lib link.
  if [ "$variant" != none ]; then
    for d in "$debs/$variant"/*.deb; do dpkg-deb --fsys-tarfile "$d" | tar -x --keep-directory-symlink -C "$root"; done
  fi
  echo "== variant $variant: $(find "$root" -name 'libibverbs.so.1' -o -name 'libucp.so.0' | sed "s|$root||" | tr '\n' ' ')"
  log=$work/$variant.log
  if inroot "$root" NCCL_DEBUG=INFO $perf >"$log" 2>&1; then
    echo "  ok: icn-perf (ICN_TRANSPORT=auto) exits 0"
  else
    echo "  FAIL ($variant): icn-perf exit $?"; tail -n 30 "$log"; fail=1
  fi
  case $variant in
    none) expect $variant "$log" 'INFO ICN transports available: tcp; unavailable: ib: libibverbs\.so\.1 not found, ucx: libucp\.so\.0 not found$' "transports line" ;;
    ib) expect $variant "$log" 'INFO ICN transports available: ib, tcp; unavailable: ucx: libucp\.so\.0 not found$' "transports line" ;;
    ucx) expect $variant "$log" 'INFO ICN transports available: tcp, ucx \(UCX [0-9.]+\); unavailable: ib: libibverbs\.so\.1 not found$' "transports line" ;;
  esac
  expect $variant "$log" 'INFO ICN transport tcp \(ICN_TRANSPORT=auto: no usable RDMA port' "auto picks the TCP transport"
  expect $variant "$log" '^ +65536 +[0-9.]+ ' "a 64 KiB transfer between two processes completes"
  if grep -q WARN "$log"; then echo "  FAIL ($variant): a WARN:"; grep WARN "$log" | head -n 5; fail=1; fi

  # A transport the root lacks, asked for explicitly: init fails with a WARN naming the library.
  missing=""
  case $variant in none) missing="ucx ib" ;; ib) missing="ucx" ;; ucx) missing="ib" ;; esac
  for m in $missing; do
    mlog=$work/$variant-$m.log
    if inroot "$root" NCCL_DEBUG=INFO ICN_TRANSPORT=$m $perf >"$mlog" 2>&1; then
      echo "  FAIL ($variant): ICN_TRANSPORT=$m succeeded without its library"; fail=1
    fi
    lib=$([ "$m" = ucx ] && echo 'libucp\.so\.0' || echo 'libibverbs\.so\.1')
    expect $variant "$mlog" "WARN ICN ICN_TRANSPORT=$m but .* unusable: $lib not found" "ICN_TRANSPORT=$m fails init with a WARN"
  done

  if [ "$variant" = ucx ]; then
    ulog=$work/ucx-transfer.log
    if ! inroot "$root" NCCL_DEBUG=INFO ICN_TRANSPORT=ucx UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n $perf >"$ulog" 2>&1; then
      echo "  FAIL (ucx): icn-perf over UCX"; tail -n 30 "$ulog"; fail=1
    fi
    expect ucx "$ulog" 'INFO ICN transport ucx \(ICN_TRANSPORT=ucx\)' "ICN_TRANSPORT=ucx picks UCX"
    expect ucx "$ulog" '^ +65536 +[0-9.]+ ' "a 64 KiB transfer over UCX completes"
  fi
  grep -h "transports available" "$log" | head -n 1 | sed 's/^/  /'
  rm -rf --one-file-system "$root"
  echo "  variant $variant: $(( $(date +%s) - tv )) s"
done
echo "total $(( $(date +%s) - t0 )) s"
exit $fail
