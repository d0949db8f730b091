// GPUDirect RDMA: which way (if any) the NIC can reach GPU memory, decided from cheap probes. The decision is a
// pure function of the probe results so tests cover every branch without a GPU or a NIC.
#pragma once
#include <string>

namespace icn::ib {

enum class GdrMode { None, DmaBuf, Peermem };
const char* toString(GdrMode m);

struct GdrProbe {
  bool cudaDriver = false;   // libcuda.so.1 loads and reports at least one device
  bool cudaDmabuf = false;   // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED on device 0
  bool verbsDmabuf = false;  // ibv_reg_dmabuf_mr(fd=-1) failed with EBADF (kernel path exists), not EOPNOTSUPP
  std::string verbsDmabufNote;  // e.g. "ibv_reg_dmabuf_mr: Operation not supported"
  bool peermem = false;      // nvidia_peermem / nv_peer_mem loaded
  std::string peermemWhich;  // which module or sysfs file proved it
};

struct GdrDecision {
  GdrMode mode = GdrMode::None;
  int ptrSupport = 1;        // icn::MemType bits
  bool peermemToo = false;   // CUDA memory without an fd can still be registered (peermem loaded as well)
  std::string why;           // one human sentence for the per-device INFO line
};

GdrDecision decideGdr(const GdrProbe& p);

// Looks for the peermem kernel module under root ("" = the real /sys).
bool peermemLoaded(const std::string& root, std::string* which);

// A receive into GPU memory needs a flush (1-byte RDMA read) so the GPU sees all bytes the NIC wrote.
bool flushNeeded(GdrMode mode, int memType, bool flushDisabled);

// Probes the CUDA driver through dlopen (no link-time dependency on CUDA). Fills cudaDriver/cudaDmabuf.
void probeCuda(GdrProbe* p);

}  // namespace icn::ib
