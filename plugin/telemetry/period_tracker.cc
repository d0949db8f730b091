#include "telemetry/period_tracker.h"

namespace icn::telemetry {

int PeriodTracker::complete(const CollTiming& t, std::array<PeriodSample, 2>& out) {
  int n = 0;
  Slot& self = ring_[t.seq % kWindow];
  if (self.used && self.t.seq == t.seq) return 0;  // a duplicate completion
  self = Slot{true, true, t};
  if (t.seq > 0) {
    const Slot& prev = ring_[(t.seq - 1) % kWindow];
    if (prev.used && follows(prev.t, t)) {
      out[n++] = PeriodSample{t, static_cast<double>(t.stopNs - prev.t.stopNs) / 1000.0};
      self.waiting = false;
    }
  }
  Slot& next = ring_[(t.seq + 1) % kWindow];
  if (next.used && next.waiting && follows(t, next.t)) {
    out[n++] = PeriodSample{next.t, static_cast<double>(next.t.stopNs - t.stopNs) / 1000.0};
    next.waiting = false;
    ++reordered_;
  }
  periods_ += static_cast<uint64_t>(n);
  return n;
}

}  // namespace icn::telemetry
