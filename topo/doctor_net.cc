// Doctor rules about GPUDirect RDMA, NICs and the NCCL environment.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "topo/doctor.h"

namespace icn::topo {
namespace {

std::string nicName(const Machine& m, size_t n) { return "NIC " + m.nics[n].name + " " + m.pci[m.nics[n].pci].busid; }

bool anyActivePort(const Nic& n) {
  for (const RdmaPort& p : n.ports)
    if (p.state == "ACTIVE") return true;
  return false;
}

std::pair<int, int> version2(const std::string& s) {
  int a = 0, b = 0;
  if (sscanf(s.c_str(), "%d.%d", &a, &b) < 1) return {0, 0};
  return {a, b};
}

// Bridges strictly between two devices, including their common ancestor.
std::vector<int> bridgesBetween(const Machine& m, int a, int b) {
  std::vector<int> ca, cb, out;
  for (int i = m.pci[a].parent; i >= 0; i = m.pci[i].parent) ca.push_back(i);
  for (int i = m.pci[b].parent; i >= 0; i = m.pci[i].parent) cb.push_back(i);
  int lca = -1;
  for (int x : ca)
    if (std::find(cb.begin(), cb.end(), x) != cb.end()) {
      lca = x;
      break;
    }
  for (int x : ca) {
    if (m.pci[x].bridge) out.push_back(x);
    if (x == lca) break;
  }
  for (int x : cb) {
    if (x == lca) break;
    if (m.pci[x].bridge) out.push_back(x);
  }
  return out;
}

// Largest IB MTU a RoCE port can use on a netdev of this MTU (RoCEv2 headers take up to 96 bytes).
int roceMtuFor(int netdevMtu) {
  int best = 0;
  for (int ib : {256, 512, 1024, 2048, 4096})
    if (ib <= netdevMtu - 96) best = ib;
  return best;
}

}  // namespace

void checkGdr(const Machine& m, std::vector<Finding>& out) {
  std::vector<size_t> rdma;
  for (size_t n = 0; n < m.nics.size(); n++)
    if (m.nics[n].rdma) rdma.push_back(n);
  if (m.gpus.empty() || rdma.empty()) return;
  const HostFacts& h = m.host;
  if (!h.kernel.empty()) {  // host facts were read (live or recorded tree)
    auto [kmaj, kmin] = version2(h.kernel);
    int drv = version2(h.nvidiaDriver).first;
    bool kernelOk = kmaj > 5 || (kmaj == 5 && kmin >= 12);
    bool dmabuf = kernelOk && drv >= 515 && h.nvidiaOpenModule;
    if (!h.peermem && !dmabuf) {
      std::string why = "nvidia_peermem is not loaded; DMA-BUF is not possible: ";
      if (!kernelOk) why += "kernel " + h.kernel + " < 5.12";
      else if (h.nvidiaDriver.empty()) why += "no NVIDIA driver module found";
      else if (drv < 515) why += "driver " + h.nvidiaDriver + " < 515";
      else why += "driver " + h.nvidiaDriver + " is the proprietary module (DMA-BUF needs the open kernel module)";
      out.push_back({"gdr-unavailable", Severity::Error, "host",
                     why,
                     "NCCL cannot register GPU memory with the NIC: every inter-node transfer is staged through "
                     "host memory (extra copy, lower bandwidth, more CPU and PCIe load)",
                     kernelOk ? "modprobe nvidia_peermem (persist it in /etc/modules-load.d), or switch to the open "
                                "GPU kernel module (DMA-BUF)"
                              : "modprobe nvidia_peermem (persist it in /etc/modules-load.d)"});
    }
  }
  for (size_t g = 0; g < m.gpus.size(); g++) {
    PathType best = PathType::SYS;
    size_t bestNic = rdma.front();
    for (size_t n : rdma) {
      PathType p = pciPath(m, m.gpus[g].pci, m.nics[n].pci);
      if (p < best) {
        best = p;
        bestNic = n;
      }
    }
    if (best > PathType::PXB) {
      out.push_back({"gdr-distance", Severity::Warning, gpuName(m, g),
                     std::string("nearest RDMA NIC ") + m.nics[bestNic].name + " is " + toString(best) +
                         " away (GPU and NIC do not share a PCIe switch)",
                     "with NCCL's default NCCL_NET_GDR_LEVEL (PXB) GPUDirect RDMA is off for this GPU: its network "
                     "traffic is staged through host memory or relayed through another GPU (PXN)",
                     "install the NIC under the same PCIe switch as the GPU; if the root complex handles P2P well, "
                     "measure with NCCL_NET_GDR_LEVEL=PHB"});
    }
    for (size_t n : rdma) {
      PathType p = pciPath(m, m.gpus[g].pci, m.nics[n].pci);
      if (p != PathType::PIX && p != PathType::PXB) continue;
      for (int b : bridgesBetween(m, m.gpus[g].pci, m.nics[n].pci)) {
        if (!m.pci[b].acsRedirect) continue;
        out.push_back({"acs-redirect", Severity::Error, gpuName(m, g) + " <-> " + m.nics[n].name,
                       "PCIe bridge " + m.pci[b].busid + " between them has ACS request/completion redirect enabled",
                       "peer-to-peer TLPs are sent up to the root complex instead of across the switch: GPUDirect "
                       "RDMA loses most of its bandwidth or fails with IOMMU faults",
                       "disable ACS redirect on the switch ports (BIOS option, or setpci -s " + m.pci[b].busid +
                           " ECAP_ACS+0x6.w=0000 at boot); with an IOMMU use iommu=pt"});
        break;
      }
    }
  }
}

void checkNics(const Machine& m, const DoctorOptions& o, std::vector<Finding>& out) {
  std::optional<CpuSet> app = effectiveAppCpus(m, o);
  for (size_t n = 0; n < m.nics.size(); n++) {
    const Nic& nic = m.nics[n];
    if (nic.rdma && !nic.ports.empty() && !anyActivePort(nic)) {
      out.push_back({"rdma-port-down", Severity::Warning, nicName(m, n),
                     "no port is ACTIVE (port 1: " + (nic.ports[0].state.empty() ? "?" : nic.ports[0].state) + ")",
                     "NCCL skips this HCA; traffic concentrates on the remaining NICs or falls back to TCP",
                     "check the cable and switch port (ibstat / ip link), and the subnet manager on InfiniBand"});
    }
    for (const RdmaPort& p : nic.ports) {
      if (p.linkLayer != "Ethernet" || p.activeMtu <= 0 || p.netdevMtu <= 0) continue;
      int expect = roceMtuFor(p.netdevMtu);
      if (p.activeMtu == expect && expect >= 4096) continue;
      std::string ev = "RoCE port " + std::to_string(p.port) + " active_mtu " + std::to_string(p.activeMtu) +
                       ", netdev " + p.netdev + " mtu " + std::to_string(p.netdevMtu);
      ev += p.activeMtu != expect ? " (the netdev allows " + std::to_string(expect) + ")"
                                  : " (too small for 4096-byte RDMA packets)";
      out.push_back({"roce-mtu", Severity::Warning, nicName(m, n), ev,
                     "RDMA messages are cut into " + std::to_string(p.activeMtu) +
                         "-byte packets: more packets and headers per byte, lower throughput than with 4096",
                     "ip link set " + (p.netdev.empty() ? std::string("<netdev>") : p.netdev) +
                         " mtu 9000 (and on the switch ports), then confirm with ibv_devinfo -v (active_mtu: 4096)"});
    }
    int numa = pciNuma(m, nic.pci);
    const Numa* node = m.numa(numa);
    std::vector<int> remote, onApp;
    int known = 0;
    for (int irq : m.pci[nic.pci].irqs) {
      auto it = m.host.irqAffinity.find(irq);
      if (it == m.host.irqAffinity.end()) continue;
      known++;
      if (node && m.numas.size() > 1 && !it->second.intersects(node->cpus)) remote.push_back(irq);
      if (app && it->second.subsetOf(*app)) onApp.push_back(irq);
    }
    auto list = [](const std::vector<int>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 8; i++) s += (i ? "," : "") + std::to_string(v[i]);
      if (v.size() > 8) s += ",...";
      return s;
    };
    if (!remote.empty()) {
      out.push_back({"nic-irq-remote", Severity::Warning, nicName(m, n),
                     std::to_string(remote.size()) + " of " + std::to_string(known) + " IRQs (" + list(remote) +
                         ") are handled only on CPUs outside the NIC's NUMA node " + std::to_string(numa),
                     "completion interrupts and their softirq work cross the socket interconnect, adding latency",
                     "pin the NIC's IRQs to its local node (set_irq_affinity_cpulist.sh or /proc/irq/N/smp_affinity_list)"});
    }
    if (!onApp.empty()) {
      out.push_back({"nic-irq-app-cores", Severity::Warning, nicName(m, n),
                     std::to_string(onApp.size()) + " of " + std::to_string(known) + " IRQs (" + list(onApp) +
                         ") land only on cores " + app->toList() + " used by the GPU processes",
                     "interrupt handling preempts the ranks' proxy/progress threads: latency jitter and lower bandwidth",
                     "move the IRQs to NIC-local cores outside the job's cpuset (irqbalance --banirq / "
                     "IRQBALANCE_BANNED_CPUS, or write smp_affinity_list)"});
    }
  }
}

void checkEnv(const Machine& m, std::vector<Finding>& out) {
  int nvPairs = 0;
  std::string pairEv;
  for (size_t a = 0; a < m.gpus.size(); a++)
    for (size_t b = a + 1; b < m.gpus.size(); b++) {
      int nv = 0;
      if (gpuPath(m, static_cast<int>(a), static_cast<int>(b), &nv) == PathType::NV) {
        if (nvPairs++ == 0) pairEv = "GPU" + std::to_string(a) + "-GPU" + std::to_string(b) + " are NV" + std::to_string(nv);
      }
    }
  auto level = m.getEnv("NCCL_P2P_LEVEL");
  bool levelOff = level && (*level == "LOC" || *level == "0");
  if (nvPairs > 0 && (envTrue(m, "NCCL_P2P_DISABLE") || levelOff)) {
    std::string setting = envTrue(m, "NCCL_P2P_DISABLE") ? "NCCL_P2P_DISABLE=" + *m.getEnv("NCCL_P2P_DISABLE")
                                                         : "NCCL_P2P_LEVEL=" + *level;
    out.push_back({"env-p2p-disabled", Severity::Error, "environment",
                   setting + " while " + pairEv + " (" + std::to_string(nvPairs) + " NVLink-connected pair(s))",
                   "NCCL does not use NVLink: intra-node traffic goes through host shared memory at a fraction of "
                   "the NVLink bandwidth",
                   "unset " + std::string(envTrue(m, "NCCL_P2P_DISABLE") ? "NCCL_P2P_DISABLE" : "NCCL_P2P_LEVEL")});
  }
  std::vector<std::string> active;
  for (const Nic& n : m.nics)
    if (n.rdma && anyActivePort(n)) active.push_back(n.name);
  if (!active.empty() && envTrue(m, "NCCL_IB_DISABLE")) {
    std::string names;
    for (size_t i = 0; i < active.size(); i++) names += (i ? "," : "") + active[i];
    out.push_back({"env-ib-disabled", Severity::Error, "environment",
                   "NCCL_IB_DISABLE=" + *m.getEnv("NCCL_IB_DISABLE") + " with active RDMA device(s) " + names,
                   "NCCL's InfiniBand/RoCE transport is off: inter-node traffic falls back to TCP sockets",
                   "unset NCCL_IB_DISABLE"});
  }
  auto gdr = m.getEnv("NCCL_NET_GDR_LEVEL");
  if (gdr && (*gdr == "LOC" || *gdr == "0") && !active.empty() && !m.gpus.empty()) {
    out.push_back({"env-gdr-level", Severity::Warning, "environment",
                   "NCCL_NET_GDR_LEVEL=" + *gdr + " with GPUs and active RDMA devices",
                   "GPUDirect RDMA is disabled for every GPU: network traffic is staged through host memory",
                   "unset NCCL_NET_GDR_LEVEL (default PXB) unless a measurement says otherwise"});
  }
  if (auto f = m.getEnv("NCCL_TOPO_FILE"); f && f->rfind("/proc/self/", 0) != 0 && access(f->c_str(), R_OK) != 0) {
    out.push_back({"env-topo-file", Severity::Error, "environment", "NCCL_TOPO_FILE=" + *f + " cannot be read",
                   "NCCL only logs this at INFO level and silently falls back to its own detection",
                   "point NCCL_TOPO_FILE at an existing file (icn-topo xml > topo.xml) or unset it"});
  }
}

}  // namespace icn::topo
