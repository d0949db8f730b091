#include "core/host_nic.h"

#include <limits.h>
#include <stdlib.h>

#include <fstream>

#include "core/params.h"

namespace icn {
namespace {
// An interface that reports no speed (loopback, veth, many VM NICs) is assumed to be 100G.
constexpr int kUnknownSpeedMbps = 100000;
}  // namespace

HostNic probeHostNic(const std::string& prefix, DeviceProps* p) {
  HostNic nic;
  if (pickInterface(&nic.addr, &nic.ifname) != Status::Ok) nic.ifname = "lo";
  p->name = prefix + "-" + nic.ifname;
  char real[PATH_MAX];
  std::string dev = "/sys/class/net/" + nic.ifname + "/device";
  if (realpath(dev.c_str(), real)) p->pciPath = real;
  int speed = -1;
  std::ifstream("/sys/class/net/" + nic.ifname + "/speed") >> speed;
  nic.speedKnown = speed > 0;
  p->speedMbps = nic.speedKnown ? speed : kUnknownSpeedMbps;
  if (int64_t forced = params::getInt(params::Id::NetSpeedMbps); forced > 0) p->speedMbps = static_cast<int>(forced);
  return nic;
}

}  // namespace icn
