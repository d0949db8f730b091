#include "log_capture.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "core/auth.h"
#include "core/log.h"
#include "core/params.h"

namespace icn::testing {
namespace {
std::mutex g_mu;
std::vector<std::string> g_warn;
std::vector<std::string> g_info;

void sink(int level, unsigned long, const char*, int, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard lk(g_mu);
  if (level == static_cast<int>(LogLevel::Info)) {
    if (g_info.size() < 4096) g_info.emplace_back(msg);  // a test that never takes them stays bounded
    return;
  }
  if (level != static_cast<int>(LogLevel::Warn)) return;
  fprintf(stderr, "[captured WARN] %s\n", msg);
  g_warn.emplace_back(msg);
}
}  // namespace

void installLogCapture() { setLogSink(&sink); }

std::vector<std::string> takeWarnings() {
  std::lock_guard lk(g_mu);
  return std::exchange(g_warn, {});
}

std::vector<std::string> takeInfos() {
  std::lock_guard lk(g_mu);
  return std::exchange(g_info, {});
}

bool warned(const std::vector<std::string>& lines, std::initializer_list<const char*> needles) {
  for (auto& l : lines) {
    bool all = true;
    for (const char* n : needles) all = all && l.find(n) != std::string::npos;
    if (all) return true;
  }
  return false;
}

void setEnvAndReload(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  params::reloadForTesting();
  auth::resetForTesting();
}

}  // namespace icn::testing
