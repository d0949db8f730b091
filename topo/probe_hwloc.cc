// hwloc -> PCI tree, NUMA nodes, CPU identity, OS device names.
#include <hwloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <type_traits>

#include "topo/probe.h"

namespace icn::topo {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

CpuSet toCpuSet(hwloc_const_bitmap_t b) {
  CpuSet s;
  if (!b || hwloc_bitmap_iszero(b)) return s;
  if (hwloc_bitmap_weight(b) < 0) return s;  // infinite set: ignore
  int i;
  hwloc_bitmap_foreach_begin(i, b) { s.set(i); }
  hwloc_bitmap_foreach_end();
  return s;
}

int numaOf(hwloc_topology_t topo, hwloc_obj_t io) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
  if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

const char* info(hwloc_obj_t o, const char* name) {
  const char* v = o ? hwloc_obj_get_info_by_name(o, name) : nullptr;
  return v ? v : "";
}

// Unidirectional MB/s of one NVLink, by generation, as hwloc's NVML backend counts it: 20000 for NVLink 1 (P100),
// 50000 for NVLink 5 (Blackwell), 25000 otherwise. An export carries no link version, only the GPU model.
double mbPerLink(const std::string& model) {
  if (model.find("P100") != std::string::npos) return 20000;
  for (const char* b : {"B100", "B200", "B300", "GB200", "GB300"})
    if (model.find(b) != std::string::npos) return 50000;
  return 25000;
}

// The NVLinkBandwidth matrix (hwloc's NVML backend; a heterogeneous one on NVSwitch machines): GPUs as NVML OS
// devices, NVSwitches as PCI devices. Each non-zero entry off the diagonal becomes an NVLink of the GPU, with
// bandwidth / per-link bandwidth links (at least 1, at most 64). Other peers (POWER packages) have no PCI bus id
// NCCL could name and are left out.
void readNvlinkBandwidth(hwloc_topology_t topo, const std::map<hwloc_obj_t, int>& index, Machine& m) {
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0 || !d) return;
  auto pciOf = [&](hwloc_obj_t o) -> int {
    if (!o) return -1;
    if (o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
    auto it = index.find(o);
    return it == index.end() ? -1 : it->second;
  };
  const unsigned n = d->nbobjs;
  for (unsigned i = 0; i < n; i++) {
    hwloc_obj_t gi = d->objs[i];
    if (!gi || gi->type != HWLOC_OBJ_OS_DEVICE) continue;  // rows of GPUs only
    int pi = pciOf(gi);
    if (pi < 0 || !m.pci[pi].hwlocGpu) continue;
    HwlocGpuFacts& g = *m.pci[pi].hwlocGpu;
    std::map<std::string, NvLink> byTarget;
    for (unsigned j = 0; j < n; j++) {
      hwloc_uint64_t bw = d->values[static_cast<size_t>(i) * n + j];
      if (j == i || bw == 0) continue;
      int pj = pciOf(d->objs[j]);
      if (pj < 0 || m.pci[pj].busid.empty()) continue;
      const PciDevice& t = m.pci[pj];
      uint32_t tclass = (t.classCode >> 16) == 0x03 ? 0x03 : (t.classCode >> 8) == 0x0680 ? 0x068000 : t.classCode;
      double links = std::round(static_cast<double>(bw) / mbPerLink(g.model));
      NvLink& l = byTarget[t.busid];
      l.target = t.busid;
      l.tclass = tclass;
      l.count = static_cast<int>(std::clamp(links, 1.0, 64.0));
    }
    g.nvlinks.clear();
    for (auto& [target, l] : byTarget) g.nvlinks.push_back(l);
  }
  hwloc_distances_release(topo, d);
}

// hwloc copies the numbers of an XML document's bridge_type and osdev_type attributes into enum fields without
// checking them, and loading an enum holding a value outside its enumerators is undefined: read the bytes as the
// enum's underlying integer and compare that against the values this hwloc knows.
template <typename E>
auto rawEnum(const E& field) {
  std::underlying_type_t<E> v;
  static_assert(sizeof v == sizeof field);
  std::memcpy(&v, &field, sizeof v);
  return v;
}

template <typename E>
bool isEnumerator(std::underlying_type_t<E> v, std::initializer_list<E> known) {
  for (E k : known)
    if (v == static_cast<std::underlying_type_t<E>>(k)) return true;
  return false;
}

}  // namespace

Status loadHwloc(const std::string& xmlPath, Machine& m, bool& thisSystem, std::string& err) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    err = "hwloc_topology_init failed";
    return Status::SystemError;
  }
  TopologyPtr topo(raw);
  if (!xmlPath.empty() && hwloc_topology_set_xml(raw, xmlPath.c_str()) != 0) {
    err = "hwloc cannot read XML " + xmlPath;
    return Status::InvalidArgument;
  }
  // Live discovery: hwloc's own Linux sysfs backend finds PCI devices and bridges. Blacklist the
  // libpciaccess component (slow name database, leaks it) and the GPU-runtime components (OpenCL, GL,
  // CUDA, ...): the shim runs this inside applications, where starting a GPU runtime is not acceptable.
  if (xmlPath.empty())
    for (const char* c : {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
      hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);  // unknown names: ignored
  // Keep the bridges and devices that lead to GPUs/NICs: the PCI path types depend on them.
  hwloc_topology_set_io_types_filter(raw, xmlPath.empty() ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
                                                         : HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0) {
    err = xmlPath.empty() ? "hwloc discovery failed" : "hwloc cannot load XML " + xmlPath;
    return xmlPath.empty() ? Status::SystemError : Status::InvalidArgument;
  }
  thisSystem = hwloc_topology_is_thissystem(raw) != 0;

  hwloc_obj_t root = hwloc_get_root_obj(raw);
  m.hostname = info(root, "HostName");
  std::string arch = info(root, "Architecture");
  m.cpu.arch = arch == "aarch64" ? "arm64" : arch.rfind("ppc64", 0) == 0 ? "ppc64" : arch;
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(raw, HWLOC_OBJ_PACKAGE, 0)) {
    m.cpu.vendor = info(pkg, "CPUVendor");
    if (*info(pkg, "CPUFamilyNumber")) m.cpu.family = atoi(info(pkg, "CPUFamilyNumber"));
    if (*info(pkg, "CPUModelNumber")) m.cpu.model = atoi(info(pkg, "CPUModelNumber"));
  }
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, n));) {
    Numa numa;
    numa.id = static_cast<int>(n->os_index);
    numa.cpus = toCpuSet(n->cpuset);
    m.numas.push_back(numa);
  }
  if (m.numas.empty()) {  // hwloc always has one, but be defensive for odd XMLs
    Numa numa;
    numa.id = 0;
    numa.cpus = toCpuSet(root->cpuset);
    m.numas.push_back(numa);
  }

  const std::string source = xmlPath.empty() ? "hwloc discovery" : "hwloc XML " + xmlPath;
  std::map<hwloc_obj_t, int> index;
  auto add = [&](hwloc_obj_t o) -> bool {
    PciDevice d;
    bool hostBridge = false;
    if (o->type == HWLOC_OBJ_BRIDGE) {
      const auto up = rawEnum(o->attr->bridge.upstream_type);
      if (!isEnumerator(up, {HWLOC_OBJ_BRIDGE_HOST, HWLOC_OBJ_BRIDGE_PCI})) {
        err = source + ": bridge (gp_index " + std::to_string(o->gp_index) + ") has unknown upstream type " +
              std::to_string(up) + " in bridge_type (known: 0 host, 1 PCI)";
        return false;
      }
      hostBridge = up == static_cast<std::remove_cv_t<decltype(up)>>(HWLOC_OBJ_BRIDGE_HOST);
    }
    if (hostBridge) {
      d.hostBridge = true;
    } else {
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = o->type == HWLOC_OBJ_BRIDGE ? o->attr->bridge.upstream.pci : o->attr->pcidev;
      d.bridge = o->type == HWLOC_OBJ_BRIDGE;
      d.busid = formatBusId((uint64_t{p.domain} << 16) | (uint64_t{p.bus} << 8) | (uint64_t{p.dev} << 3) | p.func);
      d.classCode = uint32_t{p.class_id} << 8;  // hwloc 2.x has no prog-if; sysfs fills it in
      d.vendor = p.vendor_id;
      d.device = p.device_id;
      d.subVendor = p.subvendor_id;
      d.subDevice = p.subdevice_id;
      d.link.hwlocGBs = p.linkspeed;
    }
    d.numa = numaOf(raw, o);
    index[o] = static_cast<int>(m.pci.size());
    m.pci.push_back(std::move(d));
    return true;
  };
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_bridge(raw, o));)
    if (!add(o)) return Status::InvalidArgument;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(raw, o));)
    if (!add(o)) return Status::InvalidArgument;
  for (auto& [o, i] : index) {
    auto it = index.find(o->parent);
    if (it != index.end()) {
      m.pci[i].parent = it->second;
      m.pci[it->second].children.push_back(i);
    }
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(raw, o));) {
    auto it = index.find(o->parent);
    if (it == index.end() || !o->name) continue;
    OsDev d;
    d.name = o->name;
    const auto type = rawEnum(o->attr->osdev.type);
    if (!isEnumerator(type, {HWLOC_OBJ_OSDEV_BLOCK, HWLOC_OBJ_OSDEV_GPU, HWLOC_OBJ_OSDEV_NETWORK,
                             HWLOC_OBJ_OSDEV_OPENFABRICS, HWLOC_OBJ_OSDEV_DMA, HWLOC_OBJ_OSDEV_COPROC})) {
      err = source + ": OS device " + d.name + " has unknown osdev_type " + std::to_string(type) +
            " (known: 0-5)";
      return Status::InvalidArgument;
    }
    switch (static_cast<hwloc_obj_osdev_type_t>(type)) {
      case HWLOC_OBJ_OSDEV_NETWORK: d.kind = OsDev::Kind::Net; break;
      case HWLOC_OBJ_OSDEV_OPENFABRICS: d.kind = OsDev::Kind::Rdma; break;
      case HWLOC_OBJ_OSDEV_GPU:
      case HWLOC_OBJ_OSDEV_COPROC: d.kind = OsDev::Kind::Gpu; break;
      default: d.kind = OsDev::Kind::Other; break;
    }
    m.pci[it->second].osdevs.push_back(d);
    // hwloc's NVML backend names the GPU "nvml<NVML index>"; only an export carries it (live discovery skips NVML).
    int nvml = -1;
    if (d.kind == OsDev::Kind::Gpu && sscanf(o->name, "nvml%d", &nvml) == 1 && nvml >= 0) {
      HwlocGpuFacts& g = m.pci[it->second].hwlocGpu.emplace();
      g.nvmlIndex = nvml;
      g.model = info(o, "GPUModel");
    }
  }
  readNvlinkBandwidth(raw, index, m);
  m.sources.push_back(xmlPath.empty() ? "hwloc (live)" : "hwloc XML " + xmlPath);
  return Status::Ok;
}

}  // namespace icn::topo
