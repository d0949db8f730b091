// The Ethernet interface that socket-based transports (UCX, TCP) report to NCCL: the one the out-of-band
// handshake uses, its PCI device (so NCCL places it in the topology) and its speed (NCCL sizes channels from it).
#pragma once
#include <string>

#include "core/socket.h"
#include "core/transport.h"

namespace icn {

struct HostNic {
  std::string ifname;      // "lo" when no interface could be picked
  SockAddr addr;
  bool speedKnown = false;  // false: virtual/loopback interface, speed assumed
};

// Fills name ("<prefix>-<ifname>"), pciPath and speedMbps (ICN_NET_SPEED_MBPS overrides) of `props`.
HostNic probeHostNic(const std::string& prefix, DeviceProps* props);
// The speed an interface reports, or the speed assumed when it reports none (*known false).
int interfaceSpeedMbps(const std::string& ifname, bool* known);

}  // namespace icn
