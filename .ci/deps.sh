#!/usr/bin/env bash
# Installs everything ICN builds and tests with on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config git patch ca-certificates \
  libibverbs-dev librdmacm-dev rdma-core ibverbs-utils perftest \
  libucx-dev ucx-utils libhwloc-dev libgtest-dev iperf3 \
  qemu-system-x86 linux-image-amd64 busybox-static cpio kmod iproute2 \
  clang libclang-rt-14-dev valgrind \
  python3 python3-matplotlib python3-prometheus-client python3-yaml \
  debootstrap shellcheck >/dev/null
