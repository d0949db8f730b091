// RDMA device discovery from sysfs (/sys/class/infiniband). Everything here is pure file reading under a root
// prefix, so unit tests run it against recorded trees in test/fixtures/ib/ without any RDMA hardware.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace icn::ib {

enum class GidType { Unknown, IbRoceV1, RoceV2 };

struct GidEntry {
  int index = 0;
  std::array<uint8_t, 16> gid{};
  GidType type = GidType::Unknown;
  std::string ndev;  // netdev behind a RoCE GID ("" for IB)
};

struct PortInfo {
  int port = 1;
  bool active = false;      // state "4: ACTIVE"
  bool ethernet = false;    // link_layer "Ethernet" (RoCE) vs "InfiniBand"
  int speedMbps = 0;        // from "rate" (width x lane speed, as the kernel computes it)
  uint16_t lid = 0;
  std::vector<GidEntry> gids;  // non-zero GIDs only
};

struct HcaInfo {
  std::string name;       // e.g. mlx5_0
  uint64_t guid = 0;      // node_guid, host order
  std::string pciPath;    // canonical /sys/devices/... path of the PCI function ("" for software devices)
  std::vector<PortInfo> ports;
};

// Scans <root>/sys/class/infiniband. root is "" on a real system, a fixture directory in tests. Devices are
// sorted by name; unreadable optional attributes are left at their defaults.
Status scanSysfs(const std::string& root, std::vector<HcaInfo>* out, std::string* why);

// Helpers exposed for tests.
bool parseGid(const std::string& text, std::array<uint8_t, 16>* gid);  // "fe80:0000:...:2329"
int parseRateMbps(const std::string& rate);                             // "100 Gb/sec (4X EDR)" -> 100000
bool parseGuid(const std::string& text, uint64_t* guid);                // "0c42:a103:0012:3456"
std::string gidToString(const std::array<uint8_t, 16>& gid);

}  // namespace icn::ib
