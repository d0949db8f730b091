// NVLink facts from NVML, loaded with dlopen at run time so the probes build and start without
// the NVML headers or library (they then report "NVML unavailable" and skip the comparison).
#pragma once
#include <string>

namespace icnprobe {

struct NvlinkInfo {
  bool nvmlAvailable = false;
  std::string error;        // why nothing is known, when nvmlAvailable is false or the query failed
  int activeLinks = 0;      // links in the enabled state
  int nvmlVersion = 0;      // raw nvmlNvlinkVersion_t of the first active link (6 = NVLink 4.0)
  int version = 0;          // NVLink generation used for the rate (4 on H100/H200)
  double linkMBps = 0;      // per-link, per-direction rate (0 when unknown)
  double linkRateSource = 0;  // 1 = NVML field value, 2 = derived from the NVLink generation
  std::string note;         // why the generation differs from what NVML said, if it does
};

// pciBusId as CUDA prints it ("0000:19:00.0"); ccMajor/ccMinor the GPU's compute capability
// (0 when unknown), which settles the generation when NVML's answer is ambiguous or wrong.
// Never throws; failures land in .error.
NvlinkInfo queryNvlink(const std::string& pciBusId, int ccMajor = 0, int ccMinor = 0);

// NVML's nvmlNvlinkVersion_t is an enum, not a generation: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0,
// 5 = 3.1, 6 = 4.0, 7 = 5.0. Returns the generation (1..5), 0 for unknown values.
int nvlinkGenerationFromNvml(unsigned nvmlVersion);

// The NVLink generation a GPU of this compute capability carries (P100 1, V100 2, A100 3,
// H100/H200 4, B200 5); 0 when the architecture has none or is unknown.
int nvlinkGenerationFromComputeCapability(int major, int minor);

// Per-direction GB/s of one link of an NVLink generation (used when NVML gives no speed).
double nvlinkGenerationGBps(int generation);

}  // namespace icnprobe
