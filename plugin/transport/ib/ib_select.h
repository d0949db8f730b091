// Device/port/GID selection rules, kept free of verbs so they are unit-testable against sysfs fixtures.
#pragma once
#include <string>
#include <vector>

#include "core/transport.h"
#include "transport/ib/ib_sysfs.h"

namespace icn::ib {

// ICN_IB_HCA / NCCL_IB_HCA syntax: comma list of "dev[:port]"; a leading '^' excludes the listed devices, a
// leading '=' (after an optional '^') requires exact names instead of prefixes. Empty: every device.
class HcaFilter {
 public:
  static HcaFilter parse(const std::string& spec);
  bool matches(const std::string& dev, int port) const;
  bool empty() const { return entries_.empty(); }
  std::string describe() const;

 private:
  struct Entry {
    std::string name;
    int port = -1;  // -1: any port
  };
  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

// Chooses the GID index for a port. IB ports use index 0. RoCE ports: userIndex (>= 0) when given and present;
// otherwise RoCE v2 before v1, IPv4-mapped before IPv6, global before link-local (link-local only as a last
// resort: it is only reachable inside one L2 segment). Returns -1 when the port has no usable GID; *why says
// what was chosen or why nothing was.
int selectGid(const PortInfo& port, int userIndex, std::string* why);

bool gidIsIpv4Mapped(const std::array<uint8_t, 16>& gid);
bool gidIsLinkLocal(const std::array<uint8_t, 16>& gid);

// One usable (device, port) pair after filtering: what the transport exposes as an NCCL device.
struct PortChoice {
  int hca = 0;   // index into the scanned HcaInfo vector
  int port = 1;
};
// Every active port of every HCA that passes the filter, in (device, port) order. *why explains an empty result.
std::vector<PortChoice> choosePorts(const std::vector<HcaInfo>& hcas, const HcaFilter& filter, std::string* why);

// makeVDevice: the properties of a virtual device made of physical devices `members` (indices into `phys`):
// names joined with '+', speeds added, pointer support intersected, the first member's PCI path/GUID. Fails
// (with *why) on an empty/oversized list, an unknown index, or a duplicate.
Status fuseDevices(const std::vector<DeviceProps>& phys, std::span<const int> members, DeviceProps* out,
                   std::string* why);

}  // namespace icn::ib
