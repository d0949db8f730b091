// Test helper: the logger a test hands to the plugin's init calls in NCCL's place. Every line is kept, with its level,
// subsystem flags and time since the process's first line, for the test to search or print.
#pragma once
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "abi/nccl_common.h"

namespace icn::testing {

struct NcclLogLine {
  ncclDebugLogLevel level;
  unsigned long flags;  // NCCL_INIT, NCCL_NET, NCCL_TUNING, ...
  double ms;            // since the first line of the process
  std::string text;
};

inline std::mutex g_ncclLogMu;
inline std::vector<NcclLogLine> g_ncclLog;

inline void ncclLogger(ncclDebugLogLevel level, unsigned long flags, const char*, int, const char* fmt, ...) {
  static const auto t0 = std::chrono::steady_clock::now();
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(g_ncclLogMu);
  g_ncclLog.push_back({level, flags, ms, buf});
}

inline std::vector<NcclLogLine> ncclLogLines() {
  std::lock_guard<std::mutex> lock(g_ncclLogMu);
  return g_ncclLog;
}

inline void clearNcclLog() {
  std::lock_guard<std::mutex> lock(g_ncclLogMu);
  g_ncclLog.clear();
}

// Every line's text, one a line (for a failure message).
inline std::string ncclLogText() {
  std::string out;
  for (const NcclLogLine& l : ncclLogLines()) out += l.text + '\n';
  return out;
}

// True when a line holds needle and, with a flag, was logged under that subsystem.
inline bool ncclLogged(const std::string& needle, unsigned long flag = 0) {
  std::lock_guard<std::mutex> lock(g_ncclLogMu);
  for (const NcclLogLine& l : g_ncclLog)
    if (l.text.find(needle) != std::string::npos && (flag == 0 || (l.flags & flag))) return true;
  return false;
}

}  // namespace icn::testing
