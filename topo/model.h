// The machine model every topo feature works on: PCI tree, NUMA nodes, GPUs, NICs, host facts.
// Filled by the probe (hwloc + sysfs + NVML/ibverbs, or recorded equivalents), read by show/doctor/xml/graph.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topo/cpuset.h"

namespace icn::topo {

struct OsDev {
  enum class Kind { Net, Rdma, Gpu, Other };
  std::string name;
  Kind kind = Kind::Other;
};

// PCIe link state of one device (the link towards its parent port). 0 = unknown.
struct PciLink {
  double curGTs = 0, maxGTs = 0;  // transfer rate per lane
  int curWidth = 0, maxWidth = 0;
  double hwlocGBs = 0;  // hwloc's total link bandwidth (GB/s), the only figure an hwloc XML carries
};

struct NvLink {
  std::string target;  // remote PCI bus id, lower-case 12 chars
  uint32_t tclass = 0x068000;  // 0x03 GPU, 0x068000 NVSwitch, 0x068001 CPU
  int count = 1;
};

// What an hwloc XML export says about a GPU function from hwloc's NVML backend: its "nvmlN" OS device and the
// NVLinkBandwidth distances matrix.
struct HwlocGpuFacts {
  int nvmlIndex = -1;
  std::string model;             // GPUModel
  std::vector<NvLink> nvlinks;   // grouped by target, counts from the bandwidth
};

struct PciDevice {
  std::string busid;  // lower-case "0000:07:00.0"; empty for a host bridge (root complex)
  int parent = -1;    // index into Machine::pci; -1 = attached to a NUMA node / package
  std::vector<int> children;
  bool hostBridge = false;
  bool bridge = false;  // PCI-to-PCI bridge (root port, switch port)
  uint32_t classCode = 0;  // 24-bit, e.g. 0x030200
  uint16_t vendor = 0, device = 0, subVendor = 0, subDevice = 0;
  int numa = -1;  // from sysfs numa_node or hwloc locality
  PciLink link;
  CpuSet localCpus;       // sysfs local_cpulist
  bool acsRedirect = false;  // ACS request/completion redirect enabled (forces P2P through the root complex)
  bool acsKnown = false;
  std::vector<int> irqs;  // MSI/MSI-X vectors (sysfs msi_irqs)
  std::vector<struct OsDev> osdevs;  // OS devices below this function (eth0, mlx5_0, cuda0, ...)
  std::optional<HwlocGpuFacts> hwlocGpu;
};

struct Gpu {
  int pci = -1;  // index into Machine::pci
  int index = -1;  // NVML index (what NCCL writes as gpu dev)
  int sm = 0;      // compute capability major*10+minor; 0 = unknown
  std::string name;
  int nvlinkCapable = 0;  // links that support P2P
  int nvlinkActive = 0;
  std::vector<NvLink> nvlinks;  // active links grouped by target
  bool nvmlKnown = false;
};

struct RdmaPort {
  int port = 1;
  std::string state;      // "ACTIVE", "DOWN", ...
  std::string linkLayer;  // "InfiniBand" | "Ethernet"
  double rateGbps = 0;
  int activeMtu = 0;  // bytes; 0 = unknown
  std::string netdev;  // associated netdev (RoCE / IPoIB)
  int netdevMtu = 0;
};

struct Nic {
  int pci = -1;
  std::string name;  // RDMA device (mlx5_0) or, for plain Ethernet, the netdev
  bool rdma = false;
  std::vector<std::string> netdevs;
  std::vector<RdmaPort> ports;
  int netdevMtu = 0;  // plain Ethernet NICs
  int speedMbps = 0;
};

struct Numa {
  int id = -1;
  CpuSet cpus;
};

struct CpuInfo {
  std::string arch;    // x86_64 | arm64 | ppc64
  std::string vendor;  // GenuineIntel | AuthenticAMD
  int family = -1, model = -1;
};

struct HostFacts {
  std::string kernel;  // osrelease
  std::string nvidiaDriver;  // /sys/module/nvidia/version
  bool nvidiaOpenModule = false;
  bool peermem = false;  // nvidia_peermem (or legacy nv_peer_mem) loaded
  bool haveProcStatus = false;
  CpuSet procCpus, procMems;  // Cpus_allowed_list / Mems_allowed_list of the process being checked
  CpuSet online;
  std::map<int, CpuSet> irqAffinity;  // /proc/irq/N/smp_affinity_list
};

struct Machine {
  std::string hostname;
  CpuInfo cpu;
  std::vector<Numa> numas;
  std::vector<PciDevice> pci;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  HostFacts host;
  std::map<std::string, std::string> env;  // NCCL_* / CUDA_* / LOCAL_RANK as seen by the checked process
  std::vector<std::string> sources;        // what the probe used, for show/doctor evidence

  const Numa* numa(int id) const;
  int pciIndex(const std::string& busid) const;
  std::optional<std::string> getEnv(const std::string& k) const;
};

// Path types as nvidia-smi topo -m prints them, in increasing distance.
enum class PathType { X, NV, PIX, PXB, PHB, NODE, SYS };
const char* toString(PathType p);

// PCI path between two devices (no NVLink). X when a == b.
PathType pciPath(const Machine& m, int pciA, int pciB);
// GPU-to-GPU: NV# when NVLink-connected (count in *nvCount), else the PCI path.
PathType gpuPath(const Machine& m, int gpuA, int gpuB, int* nvCount);
// NUMA node of a PCI device, walking up to the first ancestor that knows it.
int pciNuma(const Machine& m, int pci);
// Bus id parsing/formatting ("0000:07:00.0"; also accepts NVML's 8-digit domain form).
std::optional<uint64_t> parseBusId(const std::string& s);
std::string formatBusId(uint64_t v);
std::string normalizeBusId(const std::string& s);  // lower-case 12 chars, or "" when unparsable

}  // namespace icn::topo
