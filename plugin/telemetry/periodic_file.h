// A file that a background thread rewrites for the communicator ranks feeding it (the heatmap snapshot, the
// Prometheus textfile): the thread starts with the first rank and stops with the last, every
// ICN_HEATMAP_INTERVAL_MS, so nothing on NCCL's hot paths does file I/O. A finalized rank stays a member until the
// last one goes, so the final file shows every rank.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "telemetry/heatmap.h"

namespace icn::telemetry {

// The thread and the file it writes; PeriodicFile adds the members.
class PeriodicWriter {
 public:
  // Renders and writes the whole file; false with *why on failure. Called without the lock held.
  using WriteFn = bool (*)(const std::string& path, std::string* why);
  struct Target {
    std::string path;          // "": no file, no thread
    bool removeAtEnd = false;  // a live view that goes with the last member; else the last write stays
  };

  PeriodicWriter(const char* what, WriteFn write) : what_(what), write_(write) {}
  PeriodicWriter(const PeriodicWriter&) = delete;
  PeriodicWriter& operator=(const PeriodicWriter&) = delete;

 protected:
  bool runningLocked() const { return thread_.joinable(); }
  // With mu_ held and no thread running: remembers target and starts the thread on it. True when it started one.
  bool startLocked(Target target);
  // With mu_ held: asks the thread to stop and hands it over; joinStopped() joins it once mu_ is released.
  std::thread stopLocked();
  void joinStopped(std::thread stopped);
  // After the last member (thread joined): removes the file or writes it a last time, as its target says.
  void finish(const Target& target);

  mutable std::mutex mu_;
  Target target_;

 private:
  void loop();

  const char* what_;  // names the file in log lines ("heatmap")
  WriteFn write_;
  std::thread thread_;
  std::condition_variable cv_;
  bool stop_ = false;
};

// Members are communicator ranks, each with the labels this file keeps for it.
template <typename Labels = std::monostate>
class PeriodicFile : public PeriodicWriter {
 public:
  struct Member {
    std::shared_ptr<CommEntry> entry;
    Labels labels;
  };
  using PeriodicWriter::PeriodicWriter;

  // Adds a member. When no thread runs, target() (called under the lock) names the file and a thread starts on it;
  // true when one started.
  template <typename TargetFn>
  bool add(Member member, TargetFn target) {
    std::lock_guard<std::mutex> lock(mu_);
    members_.push_back(std::move(member));
    return !runningLocked() && startLocked(target());
  }

  // Finalizes entry's member (nothing when entry is none). With the last one the thread stops, the file is written
  // once more (or removed, as its target says) and every member goes.
  void finalize(const std::shared_ptr<CommEntry>& entry) {
    std::thread stopped;
    Target target;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (std::none_of(members_.begin(), members_.end(), [&](const Member& m) { return m.entry == entry; })) return;
      finalized_.push_back(entry);
      bool last = std::all_of(members_.begin(), members_.end(), [&](const Member& m) {
        return std::find(finalized_.begin(), finalized_.end(), m.entry) != finalized_.end();
      });
      if (!last) return;
      stopped = stopLocked();
      target = target_;
    }
    joinStopped(std::move(stopped));
    finish(target);
    std::lock_guard<std::mutex> lock(mu_);
    members_.clear();
    finalized_.clear();
  }

  std::vector<Member> members() const {
    std::lock_guard<std::mutex> lock(mu_);
    return members_;
  }

  // Drops every member and stops the thread without a last write.
  void resetForTesting() {
    std::thread stopped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      members_.clear();
      finalized_.clear();
      stopped = stopLocked();
    }
    joinStopped(std::move(stopped));
  }

 private:
  std::vector<Member> members_;
  std::vector<std::shared_ptr<CommEntry>> finalized_;
};

}  // namespace icn::telemetry
