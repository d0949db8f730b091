// A collective's cost per call as a loop sees it: GPU time from the end of the previous timed collective (on the
// same rank) to the end of this one.
//
// Collectives end on the GPU in launch order, but the profiler learns of them in the order the proxy thread sees
// their last channel stop, which may differ; matching only "the previous completion" then loses both calls'
// samples. So completions are kept by sequence number in a small window, and a call's period is emitted once both
// it and its predecessor are known, whichever arrives first.
//
// Spans: profiling itself slows some calls, some protocols far more than others (NCCL adds a proxy op per channel
// to read the kernel's timestamps; measurements in docs/readme/tuner.md), so the tuner may time only the first
// and last call of a run of identical calls. Two timed collectives with nothing timed between them, the same
// function, size and choice, and NCCL's own sequence numbers `calls` apart give one span sample: (end of the last -
// end of the first) / calls, the cost per call of the untimed calls between and the last one.
#pragma once
#include <array>
#include <cstdint>

#include "telemetry/kernel_timer.h"

namespace icn::telemetry {

struct PeriodSample {
  CollTiming timing;
  double periodUs = 0;
  int calls = 1;  // > 1: a span over this many calls (periodUs is per call)
};

class PeriodTracker {
 public:
  static constexpr int kWindow = 16;    // completions kept: far more than the proxy ever reorders
  static constexpr int kMaxSpan = 64;   // longest span taken (NCCL sequence numbers apart)
  // Records a completion; writes the samples it made possible (this call's and/or a successor's) to `out`.
  // Returns how many (0-2). A predecessor that was never timed (other epoch, evicted, profiler off) gives none.
  int complete(const CollTiming& t, std::array<PeriodSample, 2>& out);
  uint64_t periods() const { return periods_; }      // samples made (spans included)
  uint64_t spans() const { return spans_; }          // of those, spans
  uint64_t reordered() const { return reordered_; }  // of those, for a call known before its predecessor

 private:
  struct Slot {
    bool used = false, waiting = false;  // waiting: known, its period not yet emitted
    CollTiming t;
  };
  // Calls `next` follows `prev` by: 1 for a period of its own, > 1 for a span, 0 for no sample.
  static int callsBetween(const CollTiming& prev, const CollTiming& next);
  std::array<Slot, kWindow> ring_{};
  uint64_t periods_ = 0, spans_ = 0, reordered_ = 0;
};

}  // namespace icn::telemetry
