// A collective's cost per call as a loop sees it: GPU time from the end of the previous timed collective (on the
// same rank) to the end of this one.
//
// Collectives end on the GPU in launch order, but the profiler learns of them in the order the proxy thread sees
// their last channel stop, which may differ; matching only "the previous completion" then loses both calls'
// samples (suspected on the net path, 2 H200: a duel got 2 of its 8 Tree/Simple samples at 8 MiB with no
// collective dropped). So completions are kept by sequence number in a small window, and a call's period is
// emitted once both it and its predecessor are known, whichever arrives first.
#pragma once
#include <array>
#include <cstdint>

#include "telemetry/kernel_timer.h"

namespace icn::telemetry {

struct PeriodSample {
  CollTiming timing;
  double periodUs = 0;
};

class PeriodTracker {
 public:
  static constexpr int kWindow = 16;  // completions kept: far more than the proxy ever reorders
  // Records a completion; writes the samples it made possible (this call's and/or a successor's) to `out`.
  // Returns how many (0-2). A predecessor that was never timed (other epoch, evicted, profiler off) gives none.
  int complete(const CollTiming& t, std::array<PeriodSample, 2>& out);
  uint64_t periods() const { return periods_; }      // samples made
  uint64_t reordered() const { return reordered_; }  // of those, for a call known before its predecessor

 private:
  struct Slot {
    bool used = false, waiting = false;  // waiting: known, its period not yet emitted
    CollTiming t;
  };
  static bool follows(const CollTiming& prev, const CollTiming& next) {
    return next.seq == prev.seq + 1 && next.epoch == prev.epoch && next.stopNs > prev.stopNs;
  }
  std::array<Slot, kWindow> ring_{};
  uint64_t periods_ = 0, reordered_ = 0;
};

}  // namespace icn::telemetry
