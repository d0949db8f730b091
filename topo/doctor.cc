#include "topo/doctor.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "topo/show.h"

namespace icn::topo {

const char* toString(Severity s) {
  switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "?";
}

const std::vector<std::string>& doctorRules() {
  static const std::vector<std::string> r = {
      "gpu-numa-unknown", "gpu-affinity",   "process-binding", "pcie-degraded",     "nvlink-down",
      "gdr-unavailable",  "gdr-distance",   "acs-redirect",    "rdma-port-down",    "roce-mtu",
      "nic-irq-remote",   "nic-irq-app-cores", "env-p2p-disabled", "env-ib-disabled", "env-gdr-level",
      "env-topo-file"};
  return r;
}

std::string gpuName(const Machine& m, size_t g) { return "GPU" + std::to_string(g) + " " + m.pci[m.gpus[g].pci].busid; }

bool envTrue(const Machine& m, const char* k) {
  auto v = m.getEnv(k);
  return v && strtoll(v->c_str(), nullptr, 0) != 0;  // NCCL parses its integer params with strtoll
}

std::optional<CpuSet> effectiveAppCpus(const Machine& m, const DoctorOptions& o) {
  if (o.appCpus) return o.appCpus;
  const HostFacts& h = m.host;
  if (h.haveProcStatus && !h.online.empty() && !(h.procCpus == h.online)) return h.procCpus;
  return std::nullopt;
}

namespace {

std::optional<int> processGpu(const Machine& m, const DoctorOptions& o) {
  if (o.gpu) return o.gpu;
  std::optional<std::string> lr = m.getEnv("LOCAL_RANK");
  if (!lr) lr = m.getEnv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!lr) lr = m.getEnv("SLURM_LOCALID");
  if (!lr) return std::nullopt;
  int local = atoi(lr->c_str());
  // CUDA_VISIBLE_DEVICES remaps the process's device 0..n to physical indices.
  if (auto vis = m.getEnv("CUDA_VISIBLE_DEVICES"); vis && !vis->empty()) {
    std::vector<int> ids;
    std::stringstream ss(*vis);
    for (std::string t; std::getline(ss, t, ',');) {
      char* end = nullptr;
      long v = strtol(t.c_str(), &end, 10);
      if (end == t.c_str()) return std::nullopt;  // UUIDs: cannot map without NVML
      ids.push_back(static_cast<int>(v));
    }
    if (ids.empty()) return std::nullopt;
    local = ids[static_cast<size_t>(local) % ids.size()];
  }
  for (size_t g = 0; g < m.gpus.size(); g++)
    if (m.gpus[g].index == local) return static_cast<int>(g);
  return std::nullopt;
}

}  // namespace

void checkPlacement(const Machine& m, const DoctorOptions& o, std::vector<Finding>& out) {
  for (size_t g = 0; g < m.gpus.size(); g++) {
    const PciDevice& d = m.pci[m.gpus[g].pci];
    int numa = pciNuma(m, m.gpus[g].pci);
    if (m.numas.size() > 1 && numa < 0) {
      out.push_back({"gpu-numa-unknown", Severity::Error, gpuName(m, g),
                     "numa_node is -1 on a machine with " + std::to_string(m.numas.size()) + " NUMA nodes",
                     "NCCL and CUDA cannot tell which socket the GPU hangs off: host buffers and proxy threads may "
                     "land on the far socket, every host<->GPU and NIC<->GPU copy then crosses the inter-socket link",
                     "enable NUMA reporting in firmware (ACPI SRAT/_PXM, NPS/SNC settings) and update the BIOS; until "
                     "then bind each rank explicitly: numactl --cpunodebind=N --membind=N"});
      continue;
    }
    const Numa* node = m.numa(numa);
    if (node && !node->cpus.empty() && !d.localCpus.empty() && !(d.localCpus == node->cpus)) {
      out.push_back({"gpu-affinity", Severity::Warning, gpuName(m, g),
                     "local_cpulist " + d.localCpus.toList() + " but its NUMA node " + std::to_string(numa) +
                         " has cpus " + node->cpus.toList(),
                     "CUDA and NCCL pin the GPU's host threads to local_cpulist, which is not the GPU's own node: "
                     "host memory traffic crosses sockets",
                     "fix the platform's device locality (firmware _PXM for the root port); bind ranks with "
                     "numactl --cpunodebind=" + std::to_string(numa) + " --membind=" + std::to_string(numa)});
    }
  }
  // The binding of the process that will drive a GPU (doctor run under the job's launcher/binding).
  std::optional<int> g = processGpu(m, o);
  const HostFacts& h = m.host;
  if (g && *g >= 0 && static_cast<size_t>(*g) < m.gpus.size() && h.haveProcStatus) {
    int numa = pciNuma(m, m.gpus[*g].pci);
    const Numa* node = m.numa(numa);
    if (node) {
      std::vector<std::string> bad;
      bool cpusRestricted = !h.online.empty() && !(h.procCpus == h.online);
      if (cpusRestricted && !h.procCpus.subsetOf(node->cpus))
        bad.push_back("Cpus_allowed_list " + h.procCpus.toList() + " is not within node " + std::to_string(numa) +
                      " cpus " + node->cpus.toList());
      CpuSet allNodes;
      for (const Numa& n : m.numas) allNodes.set(n.id);
      bool memsRestricted = !(h.procMems == allNodes);
      if (memsRestricted && !h.procMems.test(numa))
        bad.push_back("Mems_allowed_list " + h.procMems.toList() + " excludes node " + std::to_string(numa));
      if (!bad.empty()) {
        std::string ev = "process drives " + gpuName(m, static_cast<size_t>(*g)) + " (node " + std::to_string(numa) + "): ";
        for (size_t i = 0; i < bad.size(); i++) ev += (i ? "; " : "") + bad[i];
        out.push_back({"process-binding", Severity::Error, gpuName(m, static_cast<size_t>(*g)), ev,
                       "the rank's threads and/or pinned host buffers live on another socket than its GPU: "
                       "every transfer crosses the inter-socket link, lowering bandwidth and adding latency",
                       "bind each local rank to its GPU's node, e.g. numactl --cpunodebind=" + std::to_string(numa) +
                           " --membind=" + std::to_string(numa) + ", or fix the launcher's --cpu-bind/--map-by"});
      }
    }
  }
}

void checkLinks(const Machine& m, std::vector<Finding>& out) {
  auto pcieCheck = [&](int pci, const std::string& subject, bool isGpu) {
    const PciLink& l = m.pci[pci].link;
    if (l.curWidth > 0 && l.maxWidth > 0 && l.curWidth < l.maxWidth) {
      out.push_back({"pcie-degraded", Severity::Warning, subject,
                     "link trained at " + describeLink(l, true) + ", capable of " + describeLink(l, false),
                     "the device gets " + std::to_string(l.curWidth) + "/" + std::to_string(l.maxWidth) +
                         " of its PCIe bandwidth: GPUDirect and host copies through it slow down accordingly",
                     "reseat the card, check the slot/riser and the BIOS bifurcation setting; confirm with "
                     "lspci -vv -s " + m.pci[pci].busid + " (LnkSta vs LnkCap)"});
    } else if (l.curGTs > 0 && l.maxGTs > 0 && l.curGTs < l.maxGTs) {
      // GPUs drop their link rate when idle (ASPM-like power management): that alone is not a fault.
      out.push_back({"pcie-degraded", isGpu ? Severity::Info : Severity::Warning, subject,
                     "link running at " + describeLink(l, true) + ", capable of " + describeLink(l, false),
                     isGpu ? "normal for an idle GPU (power management); a fault only if it persists under load"
                           : "lower PCIe generation: proportionally less bandwidth through this link",
                     isGpu ? "re-check while a job runs (nvidia-smi -q -d PCIE shows current vs max generation)"
                           : "check the slot's generation in BIOS and the riser/retimer; lspci -vv -s " +
                                 m.pci[pci].busid});
    }
  };
  for (size_t g = 0; g < m.gpus.size(); g++) pcieCheck(m.gpus[g].pci, gpuName(m, g), true);
  for (size_t n = 0; n < m.nics.size(); n++)
    pcieCheck(m.nics[n].pci, "NIC " + m.nics[n].name + " " + m.pci[m.nics[n].pci].busid, false);

  for (size_t g = 0; g < m.gpus.size(); g++) {
    const Gpu& gpu = m.gpus[g];
    if (!gpu.nvmlKnown || gpu.nvlinkCapable == 0 || gpu.nvlinkActive >= gpu.nvlinkCapable) continue;
    bool none = gpu.nvlinkActive == 0;
    out.push_back({"nvlink-down", Severity::Error, gpuName(m, g),
                   std::to_string(gpu.nvlinkActive) + " of " + std::to_string(gpu.nvlinkCapable) +
                       " NVLinks are up",
                   none ? "NCCL sees no NVLink for this GPU and falls back to PCIe P2P or host shared memory: "
                          "intra-node bandwidth drops by an order of magnitude"
                        : "NVLink bandwidth of this GPU is reduced to " + std::to_string(gpu.nvlinkActive) + "/" +
                              std::to_string(gpu.nvlinkCapable) + "; every ring through it runs at that speed",
                   "nvidia-smi nvlink -s -i " + std::to_string(gpu.index) +
                       "; on NVSwitch systems check that nvidia-fabricmanager is running; reset the GPU "
                       "(nvidia-smi -r) or reseat; persistent link errors: RMA"});
  }
}

std::vector<Finding> runDoctor(const Machine& m, const DoctorOptions& opt) {
  std::vector<Finding> out;
  checkPlacement(m, opt, out);
  checkLinks(m, out);
  checkGdr(m, out);
  checkNics(m, opt, out);
  checkEnv(m, out);
  return out;
}

std::string formatFindings(const std::vector<Finding>& f) {
  std::ostringstream o;
  for (const Finding& x : f) {
    o << "[" << toString(x.severity) << "] " << x.rule << ": " << x.subject << "\n"
      << "  evidence:    " << x.evidence << "\n"
      << "  consequence: " << x.consequence << "\n"
      << "  fix:         " << x.fix << "\n";
  }
  int bad = 0;
  for (const Finding& x : f) bad += x.severity != Severity::Info;
  o << (bad ? std::to_string(bad) + " problem(s) found" : std::string("no problems found"));
  if (f.size() > static_cast<size_t>(bad)) o << " (" << f.size() - bad << " note(s))";
  o << "\n";
  return o.str();
}

int doctorExitCode(const std::vector<Finding>& f) {
  for (const Finding& x : f)
    if (x.severity != Severity::Info) return 1;
  return 0;
}

}  // namespace icn::topo
