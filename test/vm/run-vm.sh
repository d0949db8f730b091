#!/bin/bash
# Soft-RoCE VM harness: builds an initramfs (busybox + our binaries + their shared libraries + the rdma_rxe
# module stack), boots Debian's kernel in qemu (TCG, no KVM needed), lets the guest create a veth pair with two
# rxe devices and run a guest test script, and turns the serial console's markers into an exit status.
# With --guests 2 it boots two guests from the same initramfs instead, two hosts with their own kernels: each
# has one rxe device on its virtio NIC, the NICs joined by a qemu socket link over this machine's loopback
# (guest a: 192.168.77.1, hostname icnvm-a; guest b: 192.168.77.2, icnvm-b). Both run the same guest script
# with ICN_VM_ROLE=a|b and ICN_VM_PEER set to the other guest's address. --nics 2 (two guests only) gives each
# guest a second NIC on a second link (192.168.78.1 / .2, ICN_VM_ADDR2 / ICN_VM_PEER2) with its own rxe device.
#
#   run-vm.sh --workdir DIR --script GUEST_SCRIPT [--bin FILE]... [--lib FILE]... [--file SRC=DEST]...
#             [--timeout SEC] [--kernel VMLINUZ] [--results FILE] [--env NAME=VALUE]... [--guests 1|2]
#             [--nics 1|2]
#
# Guest-side protocol (lines on ttyS0):  ICN-VM-BOOTED, ICN-VM-CHECK PASS|FAIL <name> [details],
# ICN-VM-RESULT <key>=<value>, ICN-VM-DONE. The run fails (non-zero) if a guest does not boot, does not reach
# DONE before the timeout, reports no check at all, or reports any FAIL.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
workdir="" script="" timeout=420 kernel="" results="" guests=1 nics=1
bins=() libs=() files=() envs=()

die() { echo "run-vm: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --script) script=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --kernel) kernel=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --bin) bins+=("$2"); shift 2 ;;
    --lib) libs+=("$2"); shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --guests) guests=$2; shift 2 ;;
    --nics) nics=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ -n $workdir && -n $script ]] || die "--workdir and --script are required (see --help)"
[[ -f $script ]] || die "guest script not found: $script"
[[ $guests == 1 || $guests == 2 ]] || die "--guests must be 1 or 2"
[[ $nics == 1 || ($nics == 2 && $guests == 2) ]] || die "--nics must be 1, or 2 with --guests 2"

# --- kernel and modules ---------------------------------------------------------------------------------------
if [[ -z $kernel ]]; then
  kernel=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1 || true)
fi
[[ -r $kernel ]] || die "no readable kernel image (install linux-image-amd64 or pass --kernel)"
kver=${kernel##*/vmlinuz-}
moddir=/lib/modules/$kver
[[ -d $moddir ]] || die "no modules for kernel $kver in $moddir"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not installed (package qemu-system-x86)"
busybox=$(command -v busybox || true)
# Static check without `file`: ldd refuses static executables.
[[ -n $busybox ]] && ! ldd "$busybox" >/dev/null 2>&1 || die "need a static busybox (package busybox-static)"

rm -rf "$workdir/root"
root=$workdir/root
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,etc,modules,opt/icn/bin,opt/icn/lib,usr/lib,lib64,var}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [[ $applet == busybox ]] || ln -sf busybox "$root/bin/$applet"
done

# Module dependency closure from the .ko files themselves (modinfo), so no modules.dep is needed: the Debian
# kernel package does not ship one. crc32 is a crypto soft dependency of rdma_rxe (not in "depends").
declare -A modpath=() loaded=()
while IFS= read -r f; do
  b=${f##*/}; b=${b%%.ko*}; modpath[${b//-/_}]=$f
done < <(find "$moddir/kernel" -name '*.ko*')
order=()
addmod() {
  local m=${1//-/_} dep
  [[ -n ${loaded[$m]:-} ]] && return 0
  local f=${modpath[$m]:-}
  if [[ -z $f ]]; then
    # Built into the kernel: nothing to load.
    grep -q "/${m}.ko" "$moddir/modules.builtin" 2>/dev/null && { loaded[$m]=1; return 0; }
    grep -q "/${1}.ko" "$moddir/modules.builtin" 2>/dev/null && { loaded[$m]=1; return 0; }
    die "kernel module $1 not found under $moddir"
  fi
  loaded[$m]=1
  for dep in $(modinfo -F depends "$f" | tr ',' ' '); do addmod "$dep"; done
  order+=("$f")
}
mods=(crc32_generic crc32c_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe veth)
[[ $guests == 2 ]] && mods+=(virtio_pci virtio_net)  # the NIC of each guest
for m in "${mods[@]}"; do addmod "$m"; done
: > "$root/modules/order"
for f in "${order[@]}"; do
  b=${f##*/}
  case $b in
    *.ko.xz) xz -dc "$f" > "$root/modules/${b%.xz}"; b=${b%.xz} ;;
    *.ko.zst) zstd -qdc "$f" > "$root/modules/${b%.zst}"; b=${b%.zst} ;;
    *) cp "$f" "$root/modules/$b" ;;
  esac
  echo "$b" >> "$root/modules/order"
done

# --- user space -------------------------------------------------------------------------------------------------
# Copies an ELF and, transitively via ldd, every shared library it needs, at the same absolute paths.
declare -A copied=()
copy_deps() {
  local lib
  while IFS= read -r lib; do
    [[ -z $lib || -n ${copied[$lib]:-} ]] && continue
    copied[$lib]=1
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done < <(ldd "$1" 2>/dev/null | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}')
}
copy_at() {  # copy_at SRC DEST_IN_GUEST
  mkdir -p "$root$(dirname "$2")"
  cp -L "$1" "$root$2"
  if [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == 177ELF ]]; then copy_deps "$1"; fi
}

libdir=/usr/lib/x86_64-linux-gnu
for tool in /usr/sbin/ip /usr/bin/rdma /usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong \
            /usr/bin/ib_write_bw /usr/bin/ib_write_lat /usr/bin/ucx_info /usr/bin/nm; do
  [[ -x $tool ]] && copy_at "$tool" "$tool"
done
[[ -x $root/usr/sbin/ip ]] || die "/usr/sbin/ip (iproute2) is required: busybox ip cannot create veth pairs"
[[ -x $root/usr/bin/rdma ]] || die "/usr/bin/rdma (iproute2) is required to create rxe devices"
# libibverbs finds providers through /etc/libibverbs.d/*.driver and dlopens them: only rxe is needed.
copy_at "$libdir/libibverbs/librxe-rdmav34.so" "$libdir/libibverbs/librxe-rdmav34.so"
mkdir -p "$root/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
# UCX loads its transports as modules from $libdir/ucx.
if [[ -d $libdir/ucx ]]; then
  for m in "$libdir"/ucx/*.so.0; do copy_at "$m" "$m"; done
  [[ -d /etc/ucx ]] && cp -r /etc/ucx "$root/etc/"
fi
# libgcc_s is dlopened by glibc for pthread_cancel/unwinding and not visible to ldd.
for g in /lib/x86_64-linux-gnu/libgcc_s.so.1; do [[ -f $g ]] && copy_at "$g" "$g"; done

for b in "${bins[@]}"; do [[ -f $b ]] || die "missing --bin $b"; copy_at "$b" "/opt/icn/bin/${b##*/}"; done
for l in "${libs[@]}"; do [[ -f $l ]] || die "missing --lib $l"; copy_at "$l" "/opt/icn/lib/${l##*/}"; done
for spec in "${files[@]}"; do copy_at "${spec%%=*}" "${spec#*=}"; done

cp "$here/guest-init.sh" "$root/init"
cp "$script" "$root/tests.sh"
chmod +x "$root/init"
{
  echo "export PATH=/opt/icn/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  echo "export LD_LIBRARY_PATH=/opt/icn/lib"
  for e in "${envs[@]}"; do printf 'export %q\n' "$e"; done
} > "$root/etc/icn-env"
echo "root:x:0:0:root:/:/bin/sh" > "$root/etc/passwd"
echo "127.0.0.1 localhost" > "$root/etc/hosts"
echo icnvm > "$root/etc/hostname"

initrd=$workdir/initramfs.cpio.gz
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$initrd"

# --- boot -----------------------------------------------------------------------------------------------------
qemu_base=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 2G -nographic -no-reboot
           -kernel "$kernel" -initrd "$initrd")
append="console=ttyS0 panic=-1 oops=panic loglevel=3 rdinit=/init"
echo "run-vm: kernel $kver, initramfs $(du -h "$initrd" | cut -f1), $guests guest(s), timeout ${timeout}s, log(s) in $workdir"
declare -A qrc=()
logs=()
if [[ $guests == 1 ]]; then
  logs=("$workdir/console.log")
  set +e
  timeout --foreground -k 5 "$timeout" "${qemu_base[@]}" -nic none -append "$append" </dev/null 2>&1 | tee "${logs[0]}"
  qrc[${logs[0]}]=${PIPESTATUS[0]}
  set -e
else
  # A free loopback port per link: guest a listens, guest b connects once a is listening.
  free_port() {
    local p
    for _ in $(seq 50); do
      p=$((20000 + RANDOM % 20000))
      [[ -z $(ss -Hltn "sport = :$p") && $p != "${port:-}" ]] && { echo "$p"; return; }
    done
  }
  port=$(free_port)
  [[ -n $port ]] || die "no free loopback port for the guests' link"
  port2=""
  if [[ $nics == 2 ]]; then
    port2=$(free_port)
    [[ -n $port2 ]] || die "no free loopback port for the guests' second link"
  fi
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
  boot_guest() {  # boot_guest ROLE ADDR PEER MAC NETDEV_OPTS [ADDR2 PEER2 MAC2 NETDEV2_OPTS]
    local log=$workdir/console-$1.log second=() extra=""
    logs+=("$log")
    if [[ $# -gt 5 ]]; then
      second=(-netdev "socket,id=n2,$9" -device "virtio-net-pci,netdev=n2,mac=$8")
      extra=" icn.addr2=$6 icn.peer2=$7"
    fi
    timeout --foreground -k 5 "$timeout" "${qemu_base[@]}" \
      -netdev "socket,id=n1,$5" -device "virtio-net-pci,netdev=n1,mac=$4" "${second[@]}" \
      -append "$append icn.role=$1 icn.host=icnvm-$1 icn.addr=$2 icn.peer=$3$extra" </dev/null > "$log" 2>&1 &
    pids+=($!)
  }
  nic2_a=() nic2_b=()
  if [[ $nics == 2 ]]; then
    nic2_a=(192.168.78.1 192.168.78.2 52:54:00:78:00:01 "listen=127.0.0.1:$port2")
    nic2_b=(192.168.78.2 192.168.78.1 52:54:00:78:00:02 "connect=127.0.0.1:$port2")
  fi
  boot_guest a 192.168.77.1 192.168.77.2 52:54:00:77:00:01 "listen=127.0.0.1:$port" "${nic2_a[@]}"
  for _ in $(seq 300); do
    [[ -n $(ss -Hltn "sport = :$port") ]] && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.1
  done
  if [[ $nics == 2 ]]; then  # the second link's listener too
    for _ in $(seq 300); do
      [[ -n $(ss -Hltn "sport = :$port2") ]] && break
      kill -0 "${pids[0]}" 2>/dev/null || break
      sleep 0.1
    done
  fi
  boot_guest b 192.168.77.2 192.168.77.1 52:54:00:77:00:02 "connect=127.0.0.1:$port" "${nic2_b[@]}"
  echo "run-vm: guests a and b linked through 127.0.0.1:$port"
  set +e
  for i in 0 1; do wait "${pids[$i]}"; qrc[${logs[$i]}]=$?; done
  set -e
  for log in "${logs[@]}"; do
    echo "run-vm: ---- console of ${log##*/} ----"
    cat "$log"
  done
fi

# --- verdict --------------------------------------------------------------------------------------------------
verdict=0
[[ -n $results ]] && : > "$results"
for log in "${logs[@]}"; do
  tag=""
  [[ ${#logs[@]} -gt 1 ]] && tag="${log##*/console-}" && tag="guest ${tag%.log}: "
  tr -d '\r' < "$log" > "$log.clean"
  pass=$(grep -c '^ICN-VM-CHECK PASS ' "$log.clean" || true)
  fail=$(grep -c '^ICN-VM-CHECK FAIL ' "$log.clean" || true)
  if [[ -n $results ]]; then grep '^ICN-VM-RESULT ' "$log.clean" | sed 's/^ICN-VM-RESULT //' >> "$results" || true; fi
  echo "run-vm: ---- ${tag}summary ----"
  grep -E '^ICN-VM-(CHECK|RESULT) ' "$log.clean" || true
  q=${qrc[$log]}
  if ! grep -q 'ICN-VM-BOOTED' "$log.clean"; then
    echo "run-vm: FAIL: ${tag}guest never reached /init (qemu rc $q)"; verdict=1; continue
  fi
  if ! grep -q '^ICN-VM-DONE' "$log.clean"; then
    if [[ $q -eq 124 || $q -eq 137 ]]; then echo "run-vm: FAIL: ${tag}timed out after ${timeout}s"
    else echo "run-vm: FAIL: ${tag}guest stopped before finishing (qemu rc $q)"; fi
    verdict=1; continue
  fi
  if [[ $fail -gt 0 || $pass -eq 0 ]]; then
    echo "run-vm: FAIL: ${tag}$pass passed, $fail failed"; verdict=1; continue
  fi
  echo "run-vm: ${tag}PASS: $pass checks passed"
done
exit $verdict
