#include "topo/probe.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"

extern char** environ;

namespace icn::topo {

std::map<std::string, std::string> captureEnv() {
  static const char* kPrefixes[] = {"NCCL_", "CUDA_", "ICN_", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "SLURM_LOCALID"};
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; e++) {
    const char* eq = strchr(*e, '=');
    if (!eq) continue;
    std::string k(*e, static_cast<size_t>(eq - *e));
    for (const char* p : kPrefixes)
      if (k.rfind(p, 0) == 0) env[k] = eq + 1;
  }
  return env;
}

void classifyDevices(Machine& m) {
  for (PciDevice& d : m.pci)
    std::sort(d.children.begin(), d.children.end(),
              [&](int a, int b) { return m.pci[a].busid < m.pci[b].busid; });
  m.gpus.clear();
  m.nics.clear();
  std::vector<int> order(m.pci.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return m.pci[a].busid < m.pci[b].busid; });
  for (int i : order) {
    const PciDevice& d = m.pci[i];
    if (d.hostBridge || d.bridge) continue;
    uint32_t base = d.classCode >> 16;
    if (d.vendor == 0x10de && base == 0x03) {
      Gpu g;
      g.pci = i;
      g.index = static_cast<int>(m.gpus.size());  // NVML enumerates by bus id; NVML/facts may correct it
      if (d.hwlocGpu) {  // an hwloc export made with NVML: its index, model and active NVLinks
        g.index = d.hwlocGpu->nvmlIndex;
        g.name = d.hwlocGpu->model;
        g.nvlinks = d.hwlocGpu->nvlinks;
        for (const NvLink& l : g.nvlinks) g.nvlinkActive += l.count;
        g.nvlinkCapable = g.nvlinkActive;  // the matrix holds working links only
        g.nvmlKnown = true;
      }
      m.gpus.push_back(g);
      continue;
    }
    bool hasRdma = false;
    for (const OsDev& o : d.osdevs) hasRdma |= o.kind == OsDev::Kind::Rdma;
    if (base != 0x02 && !hasRdma) continue;
    Nic n;
    n.pci = i;
    for (const OsDev& o : d.osdevs) {
      if (o.kind == OsDev::Kind::Rdma && n.name.empty()) {
        n.name = o.name;
        n.rdma = true;
      }
      if (o.kind == OsDev::Kind::Net) n.netdevs.push_back(o.name);
    }
    if (n.name.empty() && !n.netdevs.empty()) n.name = n.netdevs.front();
    if (n.name.empty()) continue;  // a NIC function without a driver bound is not usable by anyone
    m.nics.push_back(n);
  }
}

Status probe(const ProbeOptions& opt, Machine& m, std::string& err) {
  m = Machine{};
  bool thisSystem = false;
  ICN_CHECK(loadHwloc(opt.hwlocXml, m, thisSystem, err));
  const bool live = opt.hwlocXml.empty() && thisSystem;
  std::optional<std::string> root = opt.sysRoot;
  if (!root && live) root = "/";
  if (root) enrichFromSysfs(SysRoot(*root), opt.statusPid, m);
  classifyDevices(m);
  if (root) enrichNicsFromSysfs(SysRoot(*root), m);
  if (live) {
    std::string why;
    if (opt.useNvml && !enrichFromNvml(m, why)) ICN_INFO(subsys::Graph, "topo: NVML not used: %s", why.c_str());
    if (opt.useVerbs && !enrichFromVerbs(m, why)) ICN_INFO(subsys::Graph, "topo: ibverbs not used: %s", why.c_str());
  }
  if (!opt.factsFile.empty()) ICN_CHECK(applyFacts(opt.factsFile, m, err));
  m.env = opt.env ? *opt.env : captureEnv();
  return Status::Ok;
}

}  // namespace icn::topo
