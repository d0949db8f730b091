#include "transport/ib/ib_gdr.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include "core/transport.h"

namespace icn::ib {

const char* toString(GdrMode m) {
  switch (m) {
    case GdrMode::DmaBuf: return "GDR via dma-buf";
    case GdrMode::Peermem: return "GDR via peermem";
    default: return "host staging";
  }
}

GdrDecision decideGdr(const GdrProbe& p) {
  GdrDecision d;
  d.ptrSupport = kMemHost;
  if (!p.cudaDriver) {
    d.why = "no CUDA driver or no GPU visible";
    return d;
  }
  const bool dmabuf = p.cudaDmabuf && p.verbsDmabuf;
  if (dmabuf) {
    d.mode = GdrMode::DmaBuf;
    d.ptrSupport = kMemHost | kMemCuda | kMemDmabuf;
    d.peermemToo = p.peermem;
    d.why = p.peermem ? "CUDA and the RDMA driver support dma-buf (" + p.peermemWhich + " also loaded)"
                      : "CUDA and the RDMA driver support dma-buf";
    return d;
  }
  if (p.peermem) {
    d.mode = GdrMode::Peermem;
    d.ptrSupport = kMemHost | kMemCuda;
    d.peermemToo = true;
    d.why = p.peermemWhich + " loaded; dma-buf unavailable (" +
            (!p.cudaDmabuf ? std::string("CUDA driver lacks dma-buf") : p.verbsDmabufNote) + ")";
    return d;
  }
  d.why = "nvidia_peermem not loaded, ";
  if (!p.cudaDmabuf) d.why += "CUDA driver lacks dma-buf support";
  else d.why += "RDMA driver/kernel lacks dma-buf support (" + p.verbsDmabufNote + ")";
  return d;
}

bool peermemLoaded(const std::string& root, std::string* which) {
  static const char* const kPaths[][2] = {
      {"/sys/module/nvidia_peermem", "nvidia_peermem"},
      {"/sys/module/nv_peer_mem", "nv_peer_mem"},
      {"/sys/kernel/mm/memory_peers/nv_mem/version", "nv_peer_mem (memory_peers)"},
  };
  for (const auto& p : kPaths) {
    struct stat st;
    if (stat((root + p[0]).c_str(), &st) == 0) {
      if (which) *which = p[1];
      return true;
    }
  }
  return false;
}

bool flushNeeded(GdrMode mode, int memType, bool flushDisabled) {
  return mode != GdrMode::None && memType == kMemCuda && !flushDisabled;
}

void probeCuda(GdrProbe* p) {
  // The handle stays open for the process lifetime: libcuda does not support being unloaded.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using AttrFn = int (*)(int*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(lib, "cuDeviceGetAttribute"));
  if (!init || !count || !get || !attr || init(0) != 0) return;
  int n = 0, dev = 0, v = 0;
  if (count(&n) != 0 || n < 1 || get(&dev, 0) != 0) return;
  p->cudaDriver = true;
  constexpr int kAttrDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  p->cudaDmabuf = attr(&v, kAttrDmaBufSupported, dev) == 0 && v != 0;
}

}  // namespace icn::ib
