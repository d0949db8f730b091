#include "tuner/explore/bucket.h"

namespace icn::tuner {

bool Bucket::settleCached(const Decision& d, double us) {
  if (ex_.phase() != BucketExplorer::Phase::Unseen) return false;
  ex_.settle(d, 0, us);
  publish();
  return true;
}

bool Bucket::begin(const ExploreParams& p, bool adaptive, int samplesPerCall) {
  if (nCands < 2) {
    ex_.settle(Decision{}, 0, 0);
    return false;
  }
  // Index 0 for every local rank.
  ex_.beginStage1(std::span<const Decision>(cands.data(), nCands), 0, p, adaptive, samplesPerCall, ncclPick);
  return true;
}

Bucket::RoundEnd Bucket::finishRound(const std::function<uint64_t()>& issued, bool mayCommit) {
  RoundEnd r;
  if (ex_.phase() != BucketExplorer::Phase::Exploring || !ex_.roundDone(issued())) return r;
  word_.store(0);
  int stage = ex_.stage();
  r.ended = true;
  r.committed = mayCommit;
  r.info = ex_.finishRound(issued(), mayCommit);
  // Keep measuring into the duel or stage 2: switching the profiler off and on again would cost its first call's
  // sample.
  if (mayCommit && stage != BucketExplorer::kChannels)
    pendingNext_ = true;
  else
    r.demand = Demand::Stop;
  return r;
}

bool Bucket::noteDrift(bool mayReexplore) {
  if (ex_.phase() != BucketExplorer::Phase::Settled || !mayReexplore || nCands < 2 || !ex_.driftDetected())
    return false;
  pendingReexplore_ = true;
  word_.store(0);
  return true;
}

Bucket::Demand Bucket::startPending(const std::function<uint64_t()>& issued, uint64_t decided,
                                    const ExploreParams& p, bool adaptive, int samplesPerCall) {
  if (ex_.phase() != BucketExplorer::Phase::Settled || !(pendingNext_ || pendingReexplore_)) return Demand::Keep;
  word_.store(0);
  if (decided < ex_.currentFrom()) return Demand::Keep;
  uint64_t start = issued();
  Demand d;
  if (pendingReexplore_) {
    ex_.noteReexplore();
    ex_.beginStage1(std::span<const Decision>(cands.data(), nCands), start, p, adaptive, samplesPerCall, ncclPick);
    d = Demand::Start;
  } else {
    d = ex_.beginNext(start) ? Demand::Start : Demand::Stop;
  }
  pendingNext_ = pendingReexplore_ = false;
  return d;
}

void Bucket::publish() {
  if (ex_.phase() == BucketExplorer::Phase::Settled && !pendingNext_ && !pendingReexplore_)
    word_.store(packDecision(ex_.current(), ex_.currentFrom()));
}

}  // namespace icn::tuner
