#include "topo/nccl_xml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <functional>
#include <set>

#include "core/log.h"
#include "topo/xml_node.h"

namespace icn::topo {
namespace {

std::string hex(uint32_t v, int digits) {
  char b[16];
  snprintf(b, sizeof b, "0x%0*x", digits, v);
  return b;
}

// NCCL's parent for a device: two sysfs levels up (a switch's downstream port is folded into the switch);
// stops at the root complex. Returns -1 for "CPU".
int ncclParent(const Machine& m, int i) {
  int p1 = m.pci[i].parent;
  if (p1 < 0 || m.pci[p1].hostBridge) return -1;
  int p2 = m.pci[p1].parent;
  if (p2 < 0 || m.pci[p2].hostBridge) return -1;
  return p2;
}

// Lane rate and width from hwloc's total GB/s (the only thing an hwloc XML stores). NCCL only uses
// width x rate, so the widest plausible split is as good as the true one.
bool fromHwlocGBs(double gbs, double& gts, int& width) {
  static const double rates[] = {64.0, 32.0, 16.0, 8.0, 5.0, 2.5};
  for (int w : {16, 8, 4, 2, 1}) {
    for (double r : rates) {
      double enc = r >= 8.0 ? 128.0 / 130.0 : 0.8;
      double expect = w * r * enc / 8.0;
      if (std::fabs(expect - gbs) <= 0.03 * expect) {
        gts = r;
        width = w;
        return true;
      }
    }
  }
  return false;
}

void linkAttrs(const Machine& m, int i, XmlNode& n) {
  const PciDevice& d = m.pci[i];
  double gts = d.link.maxGTs;
  int width = d.link.maxWidth;
  int p = d.parent;
  if (p >= 0 && !m.pci[p].hostBridge) {  // NCCL takes the minimum of the device and its upstream port
    if (m.pci[p].link.maxGTs > 0 && (gts == 0 || m.pci[p].link.maxGTs < gts)) gts = m.pci[p].link.maxGTs;
    if (m.pci[p].link.maxWidth > 0 && (width == 0 || m.pci[p].link.maxWidth < width)) width = m.pci[p].link.maxWidth;
  }
  if ((gts == 0 || width == 0) && d.link.hwlocGBs > 0) fromHwlocGBs(d.link.hwlocGBs, gts, width);
  n.attr("link_speed", ncclLinkSpeed(gts));
  n.attr("link_width", width > 0 ? std::to_string(width) : "");
}

XmlNode pciNode(const Machine& m, int i) {
  const PciDevice& d = m.pci[i];
  XmlNode n{"pci", {}, {}};
  n.attr("busid", d.busid);
  n.attr("class", hex(d.classCode, 6));
  if (d.vendor) n.attr("vendor", hex(d.vendor, 4));
  if (d.device) n.attr("device", hex(d.device, 4));
  if (d.subVendor) n.attr("subsystem_vendor", hex(d.subVendor, 4));
  if (d.subDevice) n.attr("subsystem_device", hex(d.subDevice, 4));
  linkAttrs(m, i, n);
  return n;
}

void addEndpoint(const Machine& m, int i, XmlNode& n) {
  for (const Gpu& g : m.gpus) {
    if (g.pci != i || !g.nvmlKnown) continue;
    XmlNode& gpu = n.add("gpu");
    gpu.attr("dev", std::to_string(g.index));
    if (g.sm > 0) gpu.attr("sm", std::to_string(g.sm));
    for (const NvLink& l : g.nvlinks) {
      XmlNode& nl = gpu.add("nvlink");
      nl.attr("target", l.target);
      nl.attr("count", std::to_string(l.count));
      // NCCL matches classes by prefix: a GPU is "0x03...", switches/CPUs the full 24-bit class.
      nl.attr("tclass", (l.tclass >> 16) == 0x03 || l.tclass == 0x03 ? std::string("0x03") : hex(l.tclass, 6));
    }
  }
  for (const Nic& nic : m.nics) {
    if (nic.pci != i) continue;
    n.add("nic").add("net").attr("name", nic.name);
  }
}

}  // namespace

std::string ncclLinkSpeed(double gts) {
  if (gts <= 0) return "";
  char b[32];
  snprintf(b, sizeof b, "%.1f GT/s PCIe", gts);
  return b;
}

namespace {
XmlNode buildSystem(const Machine& m, const std::set<int>& endpoints);
}  // namespace

Status writeTopologyXml(const Machine& m, std::string& out, std::string& err) {
  // Every GPU and NIC; when that exceeds NCCL's node limit (hosts with many SR-IOV functions), keep GPUs
  // and RDMA NICs, then GPUs only: NCCL adds whatever the file leaves out from its own detection.
  size_t nodes = 0;
  for (int level = 0; level < 3; level++) {
    std::set<int> endpoints;
    for (const Gpu& g : m.gpus) endpoints.insert(g.pci);
    for (const Nic& n : m.nics)
      if (level == 0 || (level == 1 && n.rdma)) endpoints.insert(n.pci);
    if (level > 0 && endpoints.empty()) break;
    XmlNode root = buildSystem(m, endpoints);
    nodes = root.countNodes();
    if (nodes <= kNcclTopoMaxNodes) {
      if (level > 0) ICN_INFO(subsys::Graph, "topo: %zu NICs left out of the topology file to stay within NCCL's %zu nodes",
                              m.nics.size() - (endpoints.size() - m.gpus.size()), kNcclTopoMaxNodes);
      out = root.serialize();
      return Status::Ok;
    }
  }
  err = "topology has " + std::to_string(nodes) + " XML nodes; NCCL accepts at most " +
        std::to_string(kNcclTopoMaxNodes);
  return Status::InvalidUsage;
}

namespace {
XmlNode buildSystem(const Machine& m, const std::set<int>& endpoints) {
  std::map<int, std::vector<int>> kids;  // NCCL parent (-1 - numa for CPUs) -> children
  std::set<int> placed;
  auto cpuKey = [](int numa) { return -2 - std::max(numa, -1); };  // -1 -> -1, 0 -> -2, 1 -> -3 ...
  int soleNuma = m.numas.size() == 1 ? m.numas.front().id : -1;
  for (int e : endpoints) {
    for (int cur = e; cur >= 0 && !placed.count(cur);) {
      placed.insert(cur);
      int parent = ncclParent(m, cur);
      if (parent >= 0) {
        kids[parent].push_back(cur);
        cur = parent;
      } else {
        int numa = pciNuma(m, cur);
        if (numa < 0) numa = soleNuma;
        kids[cpuKey(numa)].push_back(cur);
        break;
      }
    }
  }

  XmlNode root{"system", {}, {}};
  root.attr("version", "1");
  root.attr("name", "icn-topo");
  int maxCpu = 0;
  for (const Numa& n : m.numas) maxCpu = std::max(maxCpu, n.cpus.last());
  int groups = maxCpu / 32 + 1;

  std::function<void(int, XmlNode&)> build = [&](int i, XmlNode& parentXml) {
    XmlNode n = pciNode(m, i);
    auto it = kids.find(i);
    if (it != kids.end()) {
      std::vector<int> c = it->second;
      std::sort(c.begin(), c.end(), [&](int a, int b) { return m.pci[a].busid < m.pci[b].busid; });
      for (int k : c) build(k, n);
    }
    if (endpoints.count(i)) addEndpoint(m, i, n);
    parentXml.subs.push_back(std::move(n));
  };

  std::vector<int> numaIds;
  for (auto& [key, v] : kids)
    if (key <= -1) numaIds.push_back(-2 - key);
  std::sort(numaIds.begin(), numaIds.end());
  for (int numa : numaIds) {
    XmlNode& cpu = root.add("cpu");
    cpu.attr("numaid", std::to_string(numa));
    if (const Numa* nn = m.numa(numa); nn && !nn->cpus.empty()) cpu.attr("affinity", nn->cpus.toMask(groups));
    if (!m.cpu.arch.empty()) cpu.attr("arch", m.cpu.arch);
    if (m.cpu.arch == "x86_64" && !m.cpu.vendor.empty()) {
      cpu.attr("vendor", m.cpu.vendor);
      if (m.cpu.family >= 0 && m.cpu.model >= 0) {
        cpu.attr("familyid", std::to_string(m.cpu.family));
        cpu.attr("modelid", std::to_string(m.cpu.model));
      }
    }
    std::vector<int> c = kids[cpuKey(numa)];
    std::sort(c.begin(), c.end(), [&](int a, int b) { return m.pci[a].busid < m.pci[b].busid; });
    for (int k : c) build(k, cpu);
  }

  return root;
}
}  // namespace

}  // namespace icn::topo
