#include "nvml_dl.h"

#include <dlfcn.h>
#include <cstring>
#include <mutex>

namespace icnprobe {
namespace {

// The few NVML declarations we need, written from NVML's documented ABI.
using NvmlRet = int;  // nvmlReturn_t; NVML_SUCCESS = 0
using nvmlDevice = struct nvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS on Hopper/Blackwell
constexpr unsigned kFieldNvlinkSpeedCommon = 90;  // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON (MB/s)

union NvmlValue {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
};
struct NvmlFieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;  // 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong
  NvmlRet nvmlReturn;
  NvmlValue value;
};

struct Nvml {
  void* lib = nullptr;
  NvmlRet (*init)() = nullptr;
  NvmlRet (*byPci)(const char*, nvmlDevice*) = nullptr;
  NvmlRet (*linkState)(nvmlDevice, unsigned, int*) = nullptr;
  NvmlRet (*linkVersion)(nvmlDevice, unsigned, unsigned*) = nullptr;
  NvmlRet (*fieldValues)(nvmlDevice, int, NvmlFieldValue*) = nullptr;
  const char* (*errorString)(NvmlRet) = nullptr;
  std::string error;
  bool ok = false;
};

Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n.lib) {
      n.error = std::string("cannot load libnvidia-ml.so.1: ") + dlerror();
      return;
    }
    n.init = reinterpret_cast<NvmlRet (*)()>(dlsym(n.lib, "nvmlInit_v2"));
    n.byPci = reinterpret_cast<NvmlRet (*)(const char*, nvmlDevice*)>(dlsym(n.lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.linkState = reinterpret_cast<NvmlRet (*)(nvmlDevice, unsigned, int*)>(dlsym(n.lib, "nvmlDeviceGetNvLinkState"));
    n.linkVersion = reinterpret_cast<NvmlRet (*)(nvmlDevice, unsigned, unsigned*)>(dlsym(n.lib, "nvmlDeviceGetNvLinkVersion"));
    n.fieldValues = reinterpret_cast<NvmlRet (*)(nvmlDevice, int, NvmlFieldValue*)>(dlsym(n.lib, "nvmlDeviceGetFieldValues"));
    n.errorString = reinterpret_cast<const char* (*)(NvmlRet)>(dlsym(n.lib, "nvmlErrorString"));
    if (!n.init || !n.byPci || !n.linkState) {
      n.error = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2/nvmlDeviceGetNvLinkState";
      return;
    }
    NvmlRet r = n.init();
    if (r != kNvmlSuccess) {
      n.error = std::string("nvmlInit_v2 failed: ") + (n.errorString ? n.errorString(r) : std::to_string(r));
      return;
    }
    n.ok = true;
  });
  return n;
}

}  // namespace

int nvlinkGenerationFromNvml(unsigned nvmlVersion) {
  switch (nvmlVersion) {
    case 1: return 1;
    case 2: case 3: return 2;
    case 4: case 5: return 3;
    case 6: return 4;
    case 7: return 5;
    default: return 0;
  }
}

int nvlinkGenerationFromComputeCapability(int major, int minor) {
  switch (major) {
    case 6: return minor == 0 ? 1 : 0;  // only GP100 has NVLink
    case 7: return 2;                   // V100 (7.0); Turing (7.5) boards carry NVLink 2 bridges
    case 8: return 3;                   // A100 (8.0) and Ampere boards with bridges
    case 9: return 4;                   // H100/H200/GH200
    case 10: return 5;                  // B200/GB200
    default: return 0;
  }
}

double nvlinkGenerationGBps(int version) {
  // Per link and direction: NVLink 1 20 GB/s; 2, 3 and 4 25 GB/s; 5 50 GB/s.
  switch (version) {
    case 1: return 20.0;
    case 2: case 3: case 4: return 25.0;
    case 5: return 50.0;
    default: return 0.0;
  }
}

NvlinkInfo queryNvlink(const std::string& pciBusId, int ccMajor, int ccMinor) {
  NvlinkInfo info;
  Nvml& n = nvml();
  if (!n.ok) {
    info.error = n.error;
    return info;
  }
  info.nvmlAvailable = true;
  nvmlDevice dev = nullptr;
  NvmlRet r = n.byPci(pciBusId.c_str(), &dev);
  if (r != kNvmlSuccess) {
    info.error = "no NVML device for " + pciBusId;
    return info;
  }
  for (unsigned link = 0; link < kMaxLinks; link++) {
    int active = 0;
    if (n.linkState(dev, link, &active) != kNvmlSuccess) continue;  // link absent on this GPU
    if (active != 1) continue;
    info.activeLinks++;
    unsigned v = 0;
    if (info.nvmlVersion == 0 && n.linkVersion && n.linkVersion(dev, link, &v) == kNvmlSuccess)
      info.nvmlVersion = static_cast<int>(v);
  }
  // Some drivers report NVLink 5.0 for H100s: the architecture wins when the two disagree.
  info.version = nvlinkGenerationFromNvml(static_cast<unsigned>(info.nvmlVersion));
  int fromCc = nvlinkGenerationFromComputeCapability(ccMajor, ccMinor);
  if (info.activeLinks > 0 && fromCc > 0 && fromCc != info.version) {
    info.note = "NVML reports NVLink version enum " + std::to_string(info.nvmlVersion) + " (generation " +
                std::to_string(info.version) + "); compute capability " + std::to_string(ccMajor) + "." +
                std::to_string(ccMinor) + " has generation " + std::to_string(fromCc) + ", used instead";
    info.version = fromCc;
  }
  if (n.fieldValues) {
    NvmlFieldValue fv;
    memset(&fv, 0, sizeof(fv));
    fv.fieldId = kFieldNvlinkSpeedCommon;
    if (n.fieldValues(dev, 1, &fv) == kNvmlSuccess && fv.nvmlReturn == kNvmlSuccess) {
      double mbps = 0;
      switch (fv.valueType) {
        case 0: mbps = fv.value.d; break;
        case 1: mbps = fv.value.ui; break;
        case 2: mbps = static_cast<double>(fv.value.ul); break;
        case 3: mbps = static_cast<double>(fv.value.ull); break;
        case 4: mbps = static_cast<double>(fv.value.sll); break;
        default: break;
      }
      if (mbps > 0) info.linkMBps = mbps, info.linkRateSource = 1;
    }
  }
  if (info.linkMBps == 0 && info.version > 0) {
    info.linkMBps = nvlinkGenerationGBps(info.version) * 1000.0;
    info.linkRateSource = 2;
  }
  return info;
}

}  // namespace icnprobe
