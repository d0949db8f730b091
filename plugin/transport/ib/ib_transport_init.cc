// Transport creation: sysfs scan -> HCA filter -> active ports -> verbs open -> GID -> GDR decision, with one
// INFO line per device saying what it is and which GPU memory path it uses and why.
#include <cerrno>
#include <cstdlib>
#include <map>

#include "core/log.h"
#include "core/params.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_select.h"

namespace icn::ib {

static std::string hcaFilterSpec() {
  if (params::isSetByUser(params::Id::IbHca)) return params::getString(params::Id::IbHca);
  const char* nccl = getenv("NCCL_IB_HCA");
  return nccl ? nccl : "";
}

static int mtuBytes(ibv_mtu m) { return 128 << int(m); }

Status openPorts(const std::string& sysRoot, std::vector<Port>* ports, std::string* whyNot) {
  if (!loadVerbs(whyNot)) return Status::SystemError;
  std::vector<HcaInfo> hcas;
  ICN_CHECK(scanSysfs(sysRoot, &hcas, whyNot));
  const HcaFilter filter = HcaFilter::parse(hcaFilterSpec());
  std::vector<PortChoice> chosen = choosePorts(hcas, filter, whyNot);
  if (chosen.empty()) return Status::SystemError;

  int ndev = 0;
  DevListPtr list(verbs().get_device_list(&ndev));
  if (!list) {
    *whyNot = "verbs init failed: ibv_get_device_list: " + errnoString(errno);
    return Status::SystemError;
  }
  std::map<std::string, ibv_device*> byName;
  for (int i = 0; i < ndev; ++i) byName[verbs().get_device_name(list.get()[i])] = list.get()[i];

  GdrProbe base;
  probeCuda(&base);
  base.peermem = peermemLoaded(sysRoot, &base.peermemWhich);

  std::map<int, std::shared_ptr<Hca>> opened;
  std::string lastWhy;
  const int userGid = int(params::getInt(params::Id::IbGidIndex));
  for (const PortChoice& c : chosen) {
    const HcaInfo& info = hcas[c.hca];
    std::shared_ptr<Hca>& hca = opened[c.hca];
    if (!hca) {
      auto it = byName.find(info.name);
      if (it == byName.end()) {
        lastWhy = "verbs init failed: " + info.name + " is in sysfs but not in ibv_get_device_list (provider missing?)";
        ICN_WARN(subsys::Net | subsys::Init, "%s", lastWhy.c_str());
        continue;
      }
      if (Hca::open(it->second, info, &hca, &lastWhy) != Status::Ok) {
        ICN_WARN(subsys::Net | subsys::Init, "%s", lastWhy.c_str());
        hca.reset();
        continue;
      }
      GdrProbe p = base;
      if (p.cudaDriver) hca->probeDmabuf(&p);
      hca->gdr = decideGdr(p);
    }
    if (!hca) continue;
    const PortInfo* pinfo = nullptr;
    for (const auto& p : info.ports) if (p.port == c.port) pinfo = &p;
    ibv_port_attr pa{};
    if (verbsQueryPort(hca->ctx(), uint8_t(c.port), &pa) != 0) {
      lastWhy = "verbs init failed: ibv_query_port(" + info.name + ":" + std::to_string(c.port) + "): " + errnoString(errno);
      ICN_WARN(subsys::Net | subsys::Init, "%s", lastWhy.c_str());
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      lastWhy = "no active port (" + info.name + ":" + std::to_string(c.port) + " is not ACTIVE in verbs)";
      continue;
    }
    Port port;
    port.hca = hca;
    port.port = c.port;
    port.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    port.lid = pa.lid;
    port.mtu = pa.active_mtu;
    PortInfo pi = pinfo ? *pinfo : PortInfo{};
    pi.ethernet = port.ethernet;
    std::string gidWhy;
    port.gidIndex = selectGid(pi, userGid, &gidWhy);
    if (port.gidIndex < 0 || verbs().query_gid(hca->ctx(), uint8_t(c.port), port.gidIndex, &port.gid) != 0) {
      lastWhy = info.name + ":" + std::to_string(c.port) + ": " + (port.gidIndex < 0 ? gidWhy : "ibv_query_gid failed");
      ICN_WARN(subsys::Net | subsys::Init, "skipping %s", lastWhy.c_str());
      continue;
    }
    DeviceProps& d = port.props;
    d.name = info.name;
    d.pciPath = info.pciPath;
    d.guid = info.guid;
    d.port = c.port;
    d.ptrSupport = hca->gdr.ptrSupport;
    d.regIsGlobal = false;
    d.speedMbps = pi.speedMbps > 0 ? pi.speedMbps : verbsSpeedMbps(pa.active_width, pa.active_speed);
    d.latencyUs = 0.f;
    d.maxComms = std::max(1, hca->attr().max_qp / 2);
    d.maxRecvs = kMaxRecvs;
    d.maxP2pBytes = d.maxCollBytes = (size_t{1} << 31) - 1;  // test() reports sizes as int
    d.members = {int(ports->size())};
    ICN_INFO(subsys::Net | subsys::Init, "ib device %zu: %s:%d %s, %d Mbps, MTU %d, %s, PCI %s; %s: %s", ports->size(),
             info.name.c_str(), c.port, port.ethernet ? "RoCE" : "InfiniBand", d.speedMbps, mtuBytes(port.mtu),
             gidWhy.c_str(), d.pciPath.empty() ? "none (software device)" : d.pciPath.c_str(),
             toString(hca->gdr.mode), hca->gdr.why.c_str());
    ports->push_back(std::move(port));
  }
  if (ports->empty()) {
    *whyNot = lastWhy.empty() ? "no active port" : lastWhy;
    return Status::SystemError;
  }
  return Status::Ok;
}

}  // namespace icn::ib
