#include "topo/show.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/json.h"

namespace icn::topo {
namespace {

std::string fmtGts(double g) {
  if (g <= 0) return "?";
  char b[16];
  snprintf(b, sizeof b, "%g", g);
  return b;
}

std::string pathCell(const Machine& m, int a, int b, bool aGpu, bool bGpu) {
  if (aGpu && bGpu) {
    int nv = 0;
    PathType p = gpuPath(m, a, b, &nv);
    return p == PathType::NV ? "NV" + std::to_string(nv) : toString(p);
  }
  int pa = aGpu ? m.gpus[a].pci : m.nics[a].pci;
  int pb = bGpu ? m.gpus[b].pci : m.nics[b].pci;
  return toString(pciPath(m, pa, pb));
}

}  // namespace

std::string describeLink(const PciLink& l, bool current) {
  double g = current ? l.curGTs : l.maxGTs;
  int w = current ? l.curWidth : l.maxWidth;
  if (g <= 0 && w <= 0 && l.hwlocGBs > 0) {
    char b[32];
    snprintf(b, sizeof b, "%.1f GB/s", l.hwlocGBs);
    return b;
  }
  return fmtGts(g) + " GT/s x" + (w > 0 ? std::to_string(w) : "?");
}

std::string showText(const Machine& m) {
  std::ostringstream o;
  o << "Host " << (m.hostname.empty() ? "?" : m.hostname) << ": " << m.numas.size() << " NUMA node(s), "
    << m.gpus.size() << " GPU(s), " << m.nics.size() << " NIC(s)";
  if (!m.cpu.vendor.empty()) o << ", CPU " << m.cpu.vendor << " (" << m.cpu.arch << ")";
  o << "\n\n";
  std::vector<std::string> names;
  for (size_t i = 0; i < m.gpus.size(); i++) names.push_back("GPU" + std::to_string(i));
  for (size_t i = 0; i < m.nics.size(); i++) names.push_back("NIC" + std::to_string(i));
  size_t n = names.size();
  auto cell = [&](size_t r, size_t c) {
    if (r == c) return std::string("X");
    bool rg = r < m.gpus.size(), cg = c < m.gpus.size();
    int ri = static_cast<int>(rg ? r : r - m.gpus.size()), ci = static_cast<int>(cg ? c : c - m.gpus.size());
    return pathCell(m, ri, ci, rg, cg);
  };
  if (n > 0) {
    o << "      ";
    for (const std::string& h : names) o << " " << std::string(6 - std::min<size_t>(6, h.size()), ' ') << h;
    o << "  CPU Affinity      NUMA\n";
    for (size_t r = 0; r < n; r++) {
      o << names[r] << std::string(6 - std::min<size_t>(6, names[r].size()), ' ');
      for (size_t c = 0; c < n; c++) {
        std::string v = cell(r, c);
        o << " " << std::string(6 - std::min<size_t>(6, v.size()), ' ') << v;
      }
      int pci = r < m.gpus.size() ? m.gpus[r].pci : m.nics[r - m.gpus.size()].pci;
      int numa = pciNuma(m, pci);
      std::string aff = m.pci[pci].localCpus.empty() ? "" : m.pci[pci].localCpus.toList();
      if (aff.empty())
        if (const Numa* nn = m.numa(numa)) aff = nn->cpus.toList();
      o << "  " << (aff.empty() ? "N/A" : aff) << std::string(aff.size() < 16 ? 18 - aff.size() : 2, ' ')
        << (numa >= 0 ? std::to_string(numa) : "N/A") << "\n";
    }
    o << "\nLegend: X self, NV# NVLink count, PIX one PCIe switch, PXB several switches, PHB through the host "
         "bridge, NODE across host bridges of a NUMA node, SYS across NUMA nodes\n";
  }
  if (!m.gpus.empty()) o << "\nGPUs:\n";
  for (size_t i = 0; i < m.gpus.size(); i++) {
    const Gpu& g = m.gpus[i];
    const PciDevice& d = m.pci[g.pci];
    o << "  GPU" << i << " " << d.busid << " " << (g.name.empty() ? "NVIDIA GPU" : g.name)
      << (g.sm ? " sm" + std::to_string(g.sm) : "") << " numa " << pciNuma(m, g.pci) << " pcie "
      << describeLink(d.link, true) << " (max " << describeLink(d.link, false) << ")";
    if (g.nvmlKnown) o << " nvlink " << g.nvlinkActive << "/" << g.nvlinkCapable << " up";
    o << "\n";
  }
  if (!m.nics.empty()) o << "\nNICs:\n";
  for (size_t i = 0; i < m.nics.size(); i++) {
    const Nic& nic = m.nics[i];
    const PciDevice& d = m.pci[nic.pci];
    o << "  NIC" << i << " " << nic.name << " " << d.busid << " numa " << pciNuma(m, nic.pci) << " pcie "
      << describeLink(d.link, true) << " (max " << describeLink(d.link, false) << ")";
    if (!nic.netdevs.empty()) {
      o << " netdev";
      for (const std::string& nd : nic.netdevs) o << " " << nd;
    }
    o << "\n";
    for (const RdmaPort& p : nic.ports)
      o << "    port " << p.port << " " << (p.state.empty() ? "?" : p.state) << " "
        << (p.linkLayer.empty() ? "?" : p.linkLayer) << " " << p.rateGbps << " Gb/s active_mtu "
        << (p.activeMtu ? std::to_string(p.activeMtu) : "?") << (p.netdev.empty() ? "" : " netdev " + p.netdev)
        << (p.netdevMtu ? " mtu " + std::to_string(p.netdevMtu) : "") << "\n";
  }
  o << "\nNUMA nodes:\n";
  for (const Numa& nn : m.numas) o << "  node" << nn.id << " cpus " << nn.cpus.toList() << "\n";
  o << "\nSources:";
  for (const std::string& s : m.sources) o << " [" << s << "]";
  o << "\n";
  return o.str();
}

std::string showJson(const Machine& m) {
  using json::quote;
  std::ostringstream o;
  o << "{\"version\":1,\"host\":" << quote(m.hostname) << ",\"cpu\":{\"arch\":" << quote(m.cpu.arch)
    << ",\"vendor\":" << quote(m.cpu.vendor) << ",\"family\":" << m.cpu.family << ",\"model\":" << m.cpu.model
    << "},\"numa\":[";
  for (size_t i = 0; i < m.numas.size(); i++)
    o << (i ? "," : "") << "{\"id\":" << m.numas[i].id << ",\"cpus\":" << quote(m.numas[i].cpus.toList()) << "}";
  auto link = [&](const PciLink& l) {
    std::ostringstream s;
    s << "{\"cur_gts\":" << l.curGTs << ",\"max_gts\":" << l.maxGTs << ",\"cur_width\":" << l.curWidth
      << ",\"max_width\":" << l.maxWidth << ",\"hwloc_gbs\":" << l.hwlocGBs << "}";
    return s.str();
  };
  o << "],\"gpus\":[";
  for (size_t i = 0; i < m.gpus.size(); i++) {
    const Gpu& g = m.gpus[i];
    const PciDevice& d = m.pci[g.pci];
    o << (i ? "," : "") << "{\"busid\":" << quote(d.busid) << ",\"index\":" << g.index << ",\"name\":" << quote(g.name)
      << ",\"sm\":" << g.sm << ",\"numa\":" << pciNuma(m, g.pci) << ",\"local_cpus\":" << quote(d.localCpus.toList())
      << ",\"pcie\":" << link(d.link) << ",\"nvlink_capable\":" << g.nvlinkCapable
      << ",\"nvlink_active\":" << g.nvlinkActive << ",\"nvlinks\":[";
    for (size_t k = 0; k < g.nvlinks.size(); k++)
      o << (k ? "," : "") << "{\"target\":" << quote(g.nvlinks[k].target) << ",\"count\":" << g.nvlinks[k].count
        << ",\"tclass\":" << g.nvlinks[k].tclass << "}";
    o << "]}";
  }
  o << "],\"nics\":[";
  for (size_t i = 0; i < m.nics.size(); i++) {
    const Nic& n = m.nics[i];
    const PciDevice& d = m.pci[n.pci];
    o << (i ? "," : "") << "{\"name\":" << quote(n.name) << ",\"busid\":" << quote(d.busid)
      << ",\"rdma\":" << (n.rdma ? "true" : "false") << ",\"numa\":" << pciNuma(m, n.pci) << ",\"pcie\":" << link(d.link)
      << ",\"netdevs\":[";
    for (size_t k = 0; k < n.netdevs.size(); k++) o << (k ? "," : "") << quote(n.netdevs[k]);
    o << "],\"ports\":[";
    for (size_t k = 0; k < n.ports.size(); k++) {
      const RdmaPort& p = n.ports[k];
      o << (k ? "," : "") << "{\"port\":" << p.port << ",\"state\":" << quote(p.state) << ",\"link_layer\":"
        << quote(p.linkLayer) << ",\"rate_gbps\":" << p.rateGbps << ",\"active_mtu\":" << p.activeMtu
        << ",\"netdev\":" << quote(p.netdev) << ",\"netdev_mtu\":" << p.netdevMtu << "}";
    }
    o << "]}";
  }
  // The matrix, row-major over GPUs then NICs, same cells as the text form.
  o << "],\"matrix\":{\"names\":[";
  size_t n = m.gpus.size() + m.nics.size();
  for (size_t i = 0; i < n; i++)
    o << (i ? "," : "") << quote(i < m.gpus.size() ? "GPU" + std::to_string(i) : "NIC" + std::to_string(i - m.gpus.size()));
  o << "],\"cells\":[";
  for (size_t r = 0; r < n; r++) {
    o << (r ? "," : "") << "[";
    for (size_t c = 0; c < n; c++) {
      bool rg = r < m.gpus.size(), cg = c < m.gpus.size();
      int ri = static_cast<int>(rg ? r : r - m.gpus.size()), ci = static_cast<int>(cg ? c : c - m.gpus.size());
      o << (c ? "," : "") << quote(r == c ? "X" : pathCell(m, ri, ci, rg, cg));
    }
    o << "]";
  }
  o << "]},\"sources\":[";
  for (size_t i = 0; i < m.sources.size(); i++) o << (i ? "," : "") << quote(m.sources[i]);
  o << "]}\n";
  return o.str();
}

}  // namespace icn::topo
