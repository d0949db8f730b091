#!/usr/bin/env bash
# Packs iproute2 (ip, tc) and iperf3 from this Debian machine, with the libraries they need beyond glibc,
# into DIR, each behind a wrapper that runs it through the dynamic loader with DIR/lib as its library
# path (so the machine's own libraries are untouched and child processes inherit nothing). For GPU
# machines that lack these tools: IP=DIR/ip TC=DIR/tc tools/testbed/icn-testbed ...
#   test/device/carry_net_tools.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir/bin" "$dir/lib"
for tool in /usr/bin/ip /usr/sbin/tc /usr/bin/iperf3; do
  want=$(basename "$tool")
  [ -x "$tool" ] || tool=$(command -v "$want") || { echo "carry_net_tools: $want not installed" >&2; exit 1; }
  cp -L "$tool" "$dir/bin/"
  ldd "$tool" | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|libdl|libpthread|librt)\.so' |
    while read -r lib; do cp -L "$lib" "$dir/lib/"; done
  name=$(basename "$tool")
  cat > "$dir/$name" <<WRAP
#!/bin/sh
here=\$(dirname "\$(readlink -f "\$0")")
exec /lib64/ld-linux-x86-64.so.2 --library-path "\$here/lib" "\$here/bin/$name" "\$@"
WRAP
  chmod +x "$dir/$name"
done
ls -la "$dir" "$dir/lib"
