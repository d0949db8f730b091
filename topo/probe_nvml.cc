// NVML, loaded at run time (never linked): GPU index, compute capability, NVLink state and peers.
// Declarations written from NVML's documented ABI (the unversioned entry points NCCL itself uses).
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>

#include "core/log.h"
#include "topo/probe.h"

namespace icn::topo {
namespace {

using nvmlDevice = void*;
using nvmlRet = int;
constexpr nvmlRet kNvmlSuccess = 0;
constexpr unsigned kNvmlCapP2p = 0;             // NVML_NVLINK_CAP_P2P_SUPPORTED
constexpr unsigned kFieldNvlinkGetState = 165;  // NVML_FI_DEV_NVLINK_GET_STATE
constexpr int kMaxNvlinks = 18;

struct FieldValue {  // nvmlFieldValue_t
  unsigned fieldId;
  unsigned scopeId;
  long long timestamp;
  long long latencyUsec;
  unsigned valueType;
  nvmlRet nvmlReturn;
  union {
    double d;
    unsigned ui;
    unsigned long long ull;
  } value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t is 40 bytes");

struct Nvml {
  struct Closer {
    void operator()(void* h) const { dlclose(h); }
  };
  std::unique_ptr<void, Closer> lib;
  nvmlRet (*init)() = nullptr;
  nvmlRet (*shutdown)() = nullptr;
  nvmlRet (*byBusId)(const char*, nvmlDevice*) = nullptr;
  nvmlRet (*index)(nvmlDevice, unsigned*) = nullptr;
  nvmlRet (*cc)(nvmlDevice, int*, int*) = nullptr;
  nvmlRet (*name)(nvmlDevice, char*, unsigned) = nullptr;
  nvmlRet (*linkCap)(nvmlDevice, unsigned, unsigned, unsigned*) = nullptr;
  nvmlRet (*linkState)(nvmlDevice, unsigned, int*) = nullptr;
  nvmlRet (*linkRemote)(nvmlDevice, unsigned, void*) = nullptr;
  nvmlRet (*fields)(nvmlDevice, int, FieldValue*) = nullptr;

  template <class F>
  bool sym(F& f, const char* n) {
    f = reinterpret_cast<F>(dlsym(lib.get(), n));
    return f != nullptr;
  }
  bool load(std::string& why) {
    lib.reset(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!lib) {
      why = "libnvidia-ml.so.1 not found";
      return false;
    }
    bool ok = sym(init, "nvmlInit_v2") && sym(shutdown, "nvmlShutdown") &&
              sym(byBusId, "nvmlDeviceGetHandleByPciBusId_v2") && sym(index, "nvmlDeviceGetIndex") &&
              sym(cc, "nvmlDeviceGetCudaComputeCapability") && sym(name, "nvmlDeviceGetName") &&
              sym(linkCap, "nvmlDeviceGetNvLinkCapability") && sym(linkState, "nvmlDeviceGetNvLinkState") &&
              sym(linkRemote, "nvmlDeviceGetNvLinkRemotePciInfo");
    sym(fields, "nvmlDeviceGetFieldValues");  // optional
    if (!ok) why = "libnvidia-ml.so.1 lacks an expected symbol";
    return ok;
  }
};

}  // namespace

bool enrichFromNvml(Machine& m, std::string& why) {
  bool anyNvidia = false;
  for (const Gpu& g : m.gpus) anyNvidia |= g.pci >= 0;
  if (!anyNvidia) {
    why = "no NVIDIA GPU in the PCI tree";
    return false;
  }
  Nvml nv;
  if (!nv.load(why)) return false;
  if (nv.init() != kNvmlSuccess) {
    why = "nvmlInit failed";
    return false;
  }
  for (Gpu& g : m.gpus) {
    const std::string& bus = m.pci[g.pci].busid;
    nvmlDevice dev = nullptr;
    if (nv.byBusId(bus.c_str(), &dev) != kNvmlSuccess) continue;
    g.nvmlKnown = true;
    unsigned idx = 0;
    if (nv.index(dev, &idx) == kNvmlSuccess) g.index = static_cast<int>(idx);
    int maj = 0, min = 0;
    if (nv.cc(dev, &maj, &min) == kNvmlSuccess) g.sm = maj * 10 + min;
    char nm[96] = {};
    if (nv.name(dev, nm, sizeof nm) == kNvmlSuccess) g.name = nm;
    std::map<std::string, NvLink> byTarget;
    int maxLinks = g.sm < 60 ? 0 : g.sm < 70 ? 4 : g.sm < 80 ? 6 : g.sm < 90 ? 12 : kMaxNvlinks;
    for (int l = 0; l < maxLinks; l++) {
      unsigned cap = 0;
      if (nv.linkCap(dev, static_cast<unsigned>(l), kNvmlCapP2p, &cap) != kNvmlSuccess || !cap) continue;
      g.nvlinkCapable++;
      // Like NCCL: from sm90 on the link state comes from the field API, older GPUs use GetNvLinkState.
      int active = 0;
      bool known = false;
      if (g.sm >= 90 && nv.fields) {
        FieldValue fv{};
        fv.fieldId = kFieldNvlinkGetState;
        fv.scopeId = static_cast<unsigned>(l);
        if (nv.fields(dev, 1, &fv) == kNvmlSuccess && fv.nvmlReturn == kNvmlSuccess) {
          active = fv.value.ui != 0;
          known = true;
        }
      }
      if (!known && nv.linkState(dev, static_cast<unsigned>(l), &active) != kNvmlSuccess) active = 0;
      if (!active) continue;
      g.nvlinkActive++;
      // Large enough for every nvmlPciInfo_t revision; all of them start with a NUL-terminated bus id.
      alignas(8) char pciInfo[256] = {};
      if (nv.linkRemote(dev, static_cast<unsigned>(l), pciInfo) != kNvmlSuccess) continue;
      pciInfo[31] = '\0';
      std::string target = normalizeBusId(pciInfo);
      uint32_t tclass = 0x068000;  // not visible on this host's PCI tree: an NVSwitch
      int ti = target.empty() ? -1 : m.pciIndex(target);
      if (ti >= 0) tclass = (m.pci[ti].classCode >> 16) == 0x03 ? 0x03 : m.pci[ti].classCode;
      if (target.empty()) target = "ffff:ff:1f.7";  // placeholder for an unaddressable switch port
      NvLink& nl = byTarget[target];
      if (nl.target.empty()) nl = NvLink{target, tclass, 0};
      nl.count++;
    }
    for (auto& [t, l] : byTarget) g.nvlinks.push_back(l);
  }
  nv.shutdown();
  m.sources.push_back("NVML");
  return true;
}

}  // namespace icn::topo
