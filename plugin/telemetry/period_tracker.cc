#include "telemetry/period_tracker.h"

namespace icn::telemetry {

int PeriodTracker::callsBetween(const CollTiming& prev, const CollTiming& next) {
  // Adjacent among the timed collectives of this rank, and in GPU order.
  if (next.seq != prev.seq + 1 || next.stopNs <= prev.stopNs) return 0;
  bool numbered = prev.coll == next.coll && prev.ncclSeq != CollTiming::kNoNcclSeq &&
                  next.ncclSeq != CollTiming::kNoNcclSeq;
  // Without NCCL's numbers (or across functions, which NCCL numbers apart) only a collective timed in the same
  // profiler on-phase is known to be the direct predecessor.
  if (!numbered) return next.epoch == prev.epoch ? 1 : 0;
  if (next.ncclSeq <= prev.ncclSeq) return 0;
  uint64_t gap = next.ncclSeq - prev.ncclSeq;
  // Directly consecutive, unless the profiler went off and on between them: a collective of another function may
  // have run untimed there.
  if (gap == 1) return next.epoch == prev.epoch ? 1 : 0;
  // Untimed calls between: a span only over identical calls (what the tuner asked for), never across a change.
  bool same = prev.bytes == next.bytes && prev.algo == next.algo && prev.proto == next.proto &&
              prev.channels == next.channels;
  return same && gap <= static_cast<uint64_t>(kMaxSpan) ? static_cast<int>(gap) : 0;
}

int PeriodTracker::complete(const CollTiming& t, std::array<PeriodSample, 2>& out) {
  int n = 0;
  Slot& self = ring_[t.seq % kWindow];
  if (self.used && self.t.seq == t.seq) return 0;  // a duplicate completion
  self = Slot{true, true, t};
  auto emit = [&](const CollTiming& prev, const CollTiming& next, int calls) {
    out[n++] = PeriodSample{next, static_cast<double>(next.stopNs - prev.stopNs) / 1000.0 / calls, calls};
    if (calls > 1) ++spans_;
  };
  if (t.seq > 0) {
    const Slot& prev = ring_[(t.seq - 1) % kWindow];
    if (int calls = prev.used ? callsBetween(prev.t, t) : 0; calls > 0) {
      emit(prev.t, t, calls);
      self.waiting = false;
    }
  }
  Slot& next = ring_[(t.seq + 1) % kWindow];
  if (next.used && next.waiting) {
    if (int calls = callsBetween(t, next.t); calls > 0) {
      emit(t, next.t, calls);
      next.waiting = false;
      ++reordered_;
    }
  }
  periods_ += static_cast<uint64_t>(n);
  return n;
}

}  // namespace icn::telemetry
