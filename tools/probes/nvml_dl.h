// NVLink facts from NVML, loaded with dlopen at run time so the probes build and start without
// the NVML headers or library (they then report "NVML unavailable" and skip the comparison).
#pragma once
#include <string>

namespace icnprobe {

struct NvlinkInfo {
  bool nvmlAvailable = false;
  std::string error;        // why nothing is known, when nvmlAvailable is false or the query failed
  int activeLinks = 0;      // links in the enabled state
  int version = 0;          // NVLink generation of the first active link (4 on H100/H200)
  double linkMBps = 0;      // per-link, per-direction rate NVML reports (0 when unknown)
  double linkRateSource = 0;  // 1 = NVML field value, 2 = derived from the NVLink version
};

// pciBusId as CUDA prints it ("0000:19:00.0"). Never throws; failures land in .error.
NvlinkInfo queryNvlink(const std::string& pciBusId);

// Per-direction GB/s of one link of an NVLink generation (used when NVML gives no speed).
double nvlinkGenerationGBps(int version);

}  // namespace icnprobe
