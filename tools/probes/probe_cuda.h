// The CUDA half of the probes' shared harness: error reports, the device list, event-timed loops on a stream.
// Included by the .cu probes only; the rest of the harness (options, JSON report) is plain C++ in probe_util.h.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "probe_util.h"

namespace icnprobe {

inline std::string g_cudaTool = "icn-probe";  // names the probe in CUDA error reports

inline void cudaFailed(const char* call, cudaError_t e, const char* file, int line) {
  fprintf(stderr, "%s: %s failed: %s (%s:%d)\n", g_cudaTool.c_str(), call, cudaGetErrorString(e), file, line);
}

// Makes the enclosing bool function print the failed call and return false.
#define ICN_CUDA_OK(call)                                        \
  do {                                                           \
    cudaError_t e_ = (call);                                     \
    if (e_ != cudaSuccess) {                                     \
      icnprobe::cudaFailed(#call, e_, __FILE__, __LINE__);       \
      return false;                                              \
    }                                                            \
  } while (0)

// The devices --devices named (every device when none), after parse. False when the program should exit with
// *exitCode: 1 without a CUDA device, 2 when a named one does not exist (why is printed).
inline bool resolveDevices(ProbeCli& cli, int* exitCode) {
  g_cudaTool = cli.tool();
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess || count == 0) {
    fprintf(stderr, "%s: no CUDA device (%s)\n", cli.tool().c_str(),
            ce != cudaSuccess ? cudaGetErrorString(ce) : "count is 0");
    *exitCode = 1;
    return false;
  }
  if (cli.devices.empty())
    for (int d = 0; d < count; d++) cli.devices.push_back(d);
  for (int d : cli.devices) {
    if (d < 0 || d >= count) {
      fprintf(stderr, "%s: device %d does not exist (%d present)\n", cli.tool().c_str(), d, count);
      *exitCode = 2;
      return false;
    }
  }
  return true;
}

// Enqueues once to warm up, then iters times between two events on the stream; *ms is the time of the iters.
// enqueue() puts one operation on the stream and returns its cudaError_t.
template <typename Enqueue>
bool timeOnStream(cudaStream_t stream, int iters, Enqueue enqueue, float* ms) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } ev;
  ICN_CUDA_OK(cudaEventCreate(&ev.start));
  ICN_CUDA_OK(cudaEventCreate(&ev.stop));
  ICN_CUDA_OK(enqueue());
  ICN_CUDA_OK(cudaEventRecord(ev.start, stream));
  for (int i = 0; i < iters; i++) ICN_CUDA_OK(enqueue());
  ICN_CUDA_OK(cudaEventRecord(ev.stop, stream));
  ICN_CUDA_OK(cudaEventSynchronize(ev.stop));
  ICN_CUDA_OK(cudaEventElapsedTime(ms, ev.start, ev.stop));
  return true;
}

// GB/s of iters transfers of bytes in ms milliseconds.
inline double gbps(double bytes, int iters, float ms) { return ms > 0 ? bytes * iters / (ms * 1e6) : 0; }

}  // namespace icnprobe
