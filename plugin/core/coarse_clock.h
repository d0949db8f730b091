// A cheap clock for the checks test() runs on every call (liveness polls, watchdogs), where a few milliseconds
// of resolution are plenty. steady_clock::now() reads the hardware clocksource; where that is not usable from
// the vDSO (VMs whose TSC is unstable fall back to HPET) each read is a system call, about as costly as the
// rest of a test() call. CLOCK_MONOTONIC_COARSE is always answered from the vDSO page (tick resolution) and
// shares CLOCK_MONOTONIC's epoch, which libstdc++'s steady_clock uses, so the two can be compared.
#pragma once
#include <time.h>

#include <chrono>

namespace icn {

inline std::chrono::steady_clock::time_point coarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

}  // namespace icn
