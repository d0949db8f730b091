#include "telemetry/periodic_file.h"

#include <unistd.h>

#include <chrono>

#include "core/log.h"
#include "core/params.h"

namespace icn::telemetry {

bool PeriodicWriter::startLocked(Target target) {
  target_ = std::move(target);
  if (target_.path.empty()) return false;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
  return true;
}

std::thread PeriodicWriter::stopLocked() {
  if (thread_.joinable()) stop_ = true;
  return std::move(thread_);
}

void PeriodicWriter::joinStopped(std::thread stopped) {
  cv_.notify_all();
  if (stopped.joinable()) stopped.join();
}

void PeriodicWriter::finish(const Target& target) {
  if (target.path.empty()) return;
  std::string why;
  if (target.removeAtEnd)
    unlink(target.path.c_str());
  else if (!write_(target.path, &why))
    ICN_WARN(subsys::Tuning, "%s: cannot write %s: %s", what_, target.path.c_str(), why.c_str());
}

void PeriodicWriter::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto interval = std::chrono::milliseconds(params::getInt(params::Id::HeatmapIntervalMs));
  bool warned = false;
  while (!stop_) {
    cv_.wait_for(lock, interval, [this] { return stop_; });
    std::string path = target_.path;
    lock.unlock();
    std::string why;
    if (!write_(path, &why) && !warned) {
      ICN_WARN(subsys::Tuning, "%s: cannot write %s: %s (further failures are silent)", what_, path.c_str(),
               why.c_str());
      warned = true;
    }
    lock.lock();
  }
}

}  // namespace icn::telemetry
