#include "core/host_nic.h"

#include "core/params.h"
#include "core/sysfs.h"

namespace icn {
namespace {
// An interface that reports no speed (loopback, many VM NICs) is taken to be 10 Gbit/s, the speed NCCL's own Socket
// transport assumes: NCCL's model sizes channels and picks algorithms from the speed, so over the same link ICN and
// Socket are given the same choices.
constexpr int kUnknownSpeedMbps = 10000;
}  // namespace

HostNic probeHostNic(const std::string& prefix, DeviceProps* p) {
  HostNic nic;
  if (pickInterface(&nic.addr, &nic.ifname) != Status::Ok) nic.ifname = "lo";
  p->name = prefix + "-" + nic.ifname;
  const SysRoot sys;
  const std::string dir = "/sys/class/net/" + nic.ifname;
  if (auto pci = sys.resolve(dir + "/device")) p->pciPath = *pci;
  p->speedMbps = interfaceSpeedMbps(nic.ifname, &nic.speedKnown);
  if (int64_t forced = params::getInt(params::Id::NetSpeedMbps); forced > 0) p->speedMbps = static_cast<int>(forced);
  return nic;
}

int interfaceSpeedMbps(const std::string& ifname, bool* known) {
  const SysRoot sys;
  // A link that is down reads as an error.
  const long long speed = sys.integer("/sys/class/net/" + ifname + "/speed").value_or(-1);
  *known = speed > 0 && speed <= INT32_MAX;
  return *known ? static_cast<int>(speed) : kUnknownSpeedMbps;
}

}  // namespace icn
