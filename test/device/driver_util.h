// What every device driver (one rank of a benchmark or proof) needs to stop with a message and read its arguments:
// die() names the program (its file name) and exits 2, CUDA_OK / NCCL_OK die with the call and its error, sizes
// take K/M/G suffixes (powers of 1024), numbers a range.
#pragma once
#include <cuda_runtime_api.h>
#include <errno.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

namespace icn::device {

[[noreturn]] inline void die(const char* what, const char* detail) {
  fprintf(stderr, "%s: %s%s%s\n", program_invocation_short_name, what, detail ? ": " : "", detail ? detail : "");
  exit(2);
}

inline size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v <= 0) die("bad size", s);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    case '\0': break;
    default: die("bad size suffix", s);
  }
  return static_cast<size_t>(v);
}

inline int parseInt(const char* s, int lo, int hi) {
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi) die("bad number", s);
  return static_cast<int>(v);
}

}  // namespace icn::device

#define CUDA_OK(call)                                                       \
  do {                                                                      \
    cudaError_t e_ = (call);                                                \
    if (e_ != cudaSuccess) icn::device::die(#call, cudaGetErrorString(e_)); \
  } while (0)
#define NCCL_OK(call)                                                       \
  do {                                                                      \
    ncclResult_t r_ = (call);                                               \
    if (r_ != ncclSuccess) icn::device::die(#call, ncclGetErrorString(r_)); \
  } while (0)
