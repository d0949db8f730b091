#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/status.h"

namespace icn {
namespace {
std::atomic<LogSink> g_sink{nullptr};

// Without NCCL's logger we honour NCCL_DEBUG the same way NCCL would, so tools print INFO only when asked.
int stderrThreshold() {
  static const int level = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    if (!v) return 2;
    if (!strcasecmp(v, "INFO")) return 3;
    if (!strcasecmp(v, "TRACE")) return 5;
    if (!strcasecmp(v, "WARN")) return 2;
    if (!strcasecmp(v, "VERSION") || !strcasecmp(v, "NONE")) return 1;
    return 2;
  }();
  return level;
}
}  // namespace

const char* toString(Status s) {
  switch (s) {
    case Status::Ok: return "success";
    case Status::SystemError: return "system error";
    case Status::InternalError: return "internal error";
    case Status::InvalidArgument: return "invalid argument";
    case Status::InvalidUsage: return "invalid usage";
    case Status::RemoteError: return "remote error";
  }
  return "unknown";
}

void setLogSink(LogSink sink) {
  LogSink expected = nullptr;
  if (sink) g_sink.compare_exchange_strong(expected, sink);
}

bool hasLogSink() { return g_sink.load() != nullptr; }

void logf(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  LogSink sink = g_sink.load();
  if (sink) {
    sink(static_cast<int>(level), flags, file, line, "ICN %s", msg);
    return;
  }
  if (static_cast<int>(level) > stderrThreshold()) return;
  const char* tag = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
  fprintf(stderr, "ICN %s %s\n", tag, msg);
}

}  // namespace icn
