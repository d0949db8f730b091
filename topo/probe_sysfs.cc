// sysfs/procfs (under a root prefix) -> PCIe link state, NUMA, local CPUs, ACS, IRQs, NIC ports, host facts.
#include <algorithm>
#include <cstdlib>

#include "topo/probe.h"

namespace icn::topo {
namespace {

constexpr int kAcsCapId = 0x000d;  // PCIe extended capability: Access Control Services
constexpr uint16_t kAcsReqRedirect = 1u << 2, kAcsCmpltRedirect = 1u << 3;

uint32_t le32(const std::vector<unsigned char>& b, size_t off) {
  return uint32_t{b[off]} | uint32_t{b[off + 1]} << 8 | uint32_t{b[off + 2]} << 16 | uint32_t{b[off + 3]} << 24;
}

// Walks the extended capability list (config space offset 0x100+). Needs the full 4 KiB (root reads it;
// unprivileged reads stop at 64 bytes, then ACS stays unknown).
void readAcs(const SysRoot& sys, const std::string& dir, PciDevice& d) {
  auto cfg = sys.bytes(dir + "/config", 4096);
  if (!cfg || cfg->size() < 0x104) return;
  d.acsKnown = true;
  size_t off = 0x100;
  for (int guard = 0; guard < 64 && off >= 0x100 && off + 8 <= cfg->size(); guard++) {
    uint32_t hdr = le32(*cfg, off);
    if (hdr == 0 || hdr == 0xffffffff) return;
    if ((hdr & 0xffff) == kAcsCapId) {
      uint16_t ctrl = static_cast<uint16_t>((*cfg)[off + 6] | (*cfg)[off + 7] << 8);
      d.acsRedirect = (ctrl & (kAcsReqRedirect | kAcsCmpltRedirect)) != 0;
      return;
    }
    off = hdr >> 20;
  }
}

void addOsDev(PciDevice& d, const std::string& name, OsDev::Kind kind) {
  for (const OsDev& o : d.osdevs)
    if (o.name == name) return;
  d.osdevs.push_back(OsDev{name, kind});
}

CpuSet listOr(const std::optional<std::string>& s) {
  if (!s) return CpuSet{};
  auto c = CpuSet::parseList(*s);
  return c ? *c : CpuSet{};
}

}  // namespace

double parseLinkSpeed(const std::string& s) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return 0;
  return v;
}

void enrichFromSysfs(const SysRoot& sys, const std::string& statusPid, Machine& m) {
  for (PciDevice& d : m.pci) {
    if (d.busid.empty()) continue;
    std::string dir = "/sys/bus/pci/devices/" + d.busid;
    if (!sys.exists(dir)) continue;
    if (auto n = sys.integer(dir + "/numa_node")) d.numa = static_cast<int>(*n);
    if (auto l = sys.line(dir + "/local_cpulist")) {
      if (auto c = CpuSet::parseList(*l)) d.localCpus = *c;
    }
    if (auto v = sys.line(dir + "/current_link_speed")) d.link.curGTs = parseLinkSpeed(*v);
    if (auto v = sys.line(dir + "/max_link_speed")) d.link.maxGTs = parseLinkSpeed(*v);
    if (auto v = sys.integer(dir + "/current_link_width")) d.link.curWidth = static_cast<int>(*v);
    if (auto v = sys.integer(dir + "/max_link_width")) d.link.maxWidth = static_cast<int>(*v);
    if (auto v = sys.integer(dir + "/class")) d.classCode = static_cast<uint32_t>(*v);
    if (d.vendor == 0) {
      if (auto v = sys.integer(dir + "/vendor")) d.vendor = static_cast<uint16_t>(*v);
    }
    if (d.device == 0) {
      if (auto v = sys.integer(dir + "/device")) d.device = static_cast<uint16_t>(*v);
    }
    if (d.bridge) readAcs(sys, dir, d);
    for (const std::string& irq : sys.list(dir + "/msi_irqs")) d.irqs.push_back(atoi(irq.c_str()));
    std::sort(d.irqs.begin(), d.irqs.end());
    for (const std::string& ib : sys.list(dir + "/infiniband")) addOsDev(d, ib, OsDev::Kind::Rdma);
    for (const std::string& nd : sys.list(dir + "/net")) addOsDev(d, nd, OsDev::Kind::Net);
  }

  // NUMA nodes as the kernel sees them (a recorded tree wins over the hwloc view of the same machine).
  for (const std::string& n : sys.list("/sys/devices/system/node")) {
    if (n.rfind("node", 0) != 0 || n.size() < 5 || !isdigit(static_cast<unsigned char>(n[4]))) continue;
    int id = atoi(n.c_str() + 4);
    auto cpus = sys.line("/sys/devices/system/node/" + n + "/cpulist");
    Numa* numa = nullptr;
    for (Numa& x : m.numas)
      if (x.id == id) numa = &x;
    if (!numa) {
      m.numas.push_back(Numa{id, {}});
      numa = &m.numas.back();
    }
    if (cpus) numa->cpus = listOr(cpus);
  }
  std::sort(m.numas.begin(), m.numas.end(), [](const Numa& a, const Numa& b) { return a.id < b.id; });

  HostFacts& h = m.host;
  if (auto v = sys.line("/proc/sys/kernel/osrelease")) h.kernel = *v;
  if (auto v = sys.line("/sys/module/nvidia/version")) h.nvidiaDriver = *v;
  if (auto v = sys.text("/proc/driver/nvidia/version", 4096))
    h.nvidiaOpenModule = v->find("Open Kernel Module") != std::string::npos;
  h.peermem = sys.exists("/sys/module/nvidia_peermem") || sys.exists("/sys/module/nv_peer_mem");
  h.online = listOr(sys.line("/sys/devices/system/cpu/online"));
  if (auto raw = sys.text("/proc/" + statusPid + "/status")) {
    auto st = std::optional<std::string>("\n" + *raw);  // so the first line matches "\nKey:" too
    auto field = [&](const std::string& key) -> std::optional<std::string> {
      size_t p = st->find("\n" + key + ":");
      if (p == std::string::npos) return std::nullopt;
      p += key.size() + 2;
      size_t e = st->find('\n', p);
      std::string v = st->substr(p, e == std::string::npos ? std::string::npos : e - p);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    };
    auto cpus = field("Cpus_allowed_list");
    auto mems = field("Mems_allowed_list");
    if (cpus && mems) {
      h.haveProcStatus = true;
      h.procCpus = listOr(cpus);
      h.procMems = listOr(mems);
    }
  }
  for (const PciDevice& d : m.pci)
    for (int irq : d.irqs)
      if (auto a = sys.line("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list"))
        if (auto c = CpuSet::parseList(*a)) h.irqAffinity[irq] = *c;
  m.sources.push_back("sysfs under " + sys.root());
}

void enrichNicsFromSysfs(const SysRoot& sys, Machine& m) {
  for (Nic& nic : m.nics) {
    for (const std::string& nd : nic.netdevs) {
      if (auto mtu = sys.integer("/sys/class/net/" + nd + "/mtu")) nic.netdevMtu = static_cast<int>(*mtu);
      if (auto sp = sys.integer("/sys/class/net/" + nd + "/speed"); sp && *sp > 0)
        nic.speedMbps = static_cast<int>(*sp);
      if (nic.netdevMtu) break;
    }
    if (!nic.rdma) continue;
    std::string base = "/sys/class/infiniband/" + nic.name + "/ports";
    for (const std::string& p : sys.list(base)) {
      RdmaPort port;
      port.port = atoi(p.c_str());
      if (auto s = sys.line(base + "/" + p + "/state")) {
        size_t colon = s->find(':');
        port.state = colon == std::string::npos ? *s : s->substr(s->find_first_not_of(' ', colon + 1));
      }
      if (auto l = sys.line(base + "/" + p + "/link_layer")) port.linkLayer = *l;
      if (auto r = sys.line(base + "/" + p + "/rate")) port.rateGbps = strtod(r->c_str(), nullptr);
      // The port's netdev: the function's netdev whose dev_port matches, else the first one.
      for (const std::string& nd : nic.netdevs) {
        auto dp = sys.integer("/sys/class/net/" + nd + "/dev_port");
        if (port.netdev.empty() || (dp && *dp == port.port - 1)) port.netdev = nd;
      }
      if (!port.netdev.empty())
        if (auto mtu = sys.integer("/sys/class/net/" + port.netdev + "/mtu")) port.netdevMtu = static_cast<int>(*mtu);
      nic.ports.push_back(port);
    }
  }
}

}  // namespace icn::topo
