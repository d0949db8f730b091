#include "tuner/explore/bucket.h"

#include <algorithm>

namespace icn::tuner {

void Bucket::takeCandidates(const CostTable& table) {
  for (int a = 0; a < table.algos(); ++a)
    for (int p = 0; p < table.protos(); ++p)
      if (table.supported(a, p) && nCands_ < BucketExplorer::kMaxArms)
        cands_[nCands_++] = Decision{static_cast<int8_t>(a), static_cast<int8_t>(p), 0};
  std::stable_sort(cands_.begin(), cands_.begin() + nCands_, [&](const Decision& x, const Decision& y) {
    return table.at(x.algo, x.proto) < table.at(y.algo, y.proto);
  });
  ncclChoice_ = table.ncclChoice();
}

void Bucket::moveToFront(const Decision& d) {
  for (int i = 1; i < nCands_; ++i)
    if (cands_[i].algo == d.algo && cands_[i].proto == d.proto) {
      std::rotate(cands_.begin(), cands_.begin() + i, cands_.begin() + i + 1);
      return;
    }
}

int Bucket::ncclIndex() const {
  int found = -1;
  for (int i = 0; i < nCands_; ++i)
    if (cands_[i].algo == ncclChoice_.algo && cands_[i].proto == ncclChoice_.proto) found = i;
  return found;
}

Decision Bucket::ncclChoice() const {
  int i = ncclIndex();
  return i >= 0 ? cands_[i] : Decision{};
}

bool Bucket::settleCached(const Decision& d, double us) {
  if (ex_.phase() != BucketExplorer::Phase::Unseen) return false;
  ex_.settle(d, 0, us);
  publish();
  return true;
}

bool Bucket::begin(const ExploreParams& p, bool adaptive, int samplesPerCall) {
  if (nCands_ < 2) {
    ex_.settle(Decision{}, 0, 0);
    return false;
  }
  // Index 0 for every local rank.
  ex_.beginStage1(candidates(), 0, p, adaptive, samplesPerCall, ncclIndex());
  return true;
}

bool Bucket::noteExploringCall(uint64_t index, uint64_t seq, uint64_t upTo, bool processMeasures) {
  // Other buckets' calls since this one's last (back from parking, or a jump in the group's count; local ranks
  // may take the lock out of their order, so only a jump forward counts): a quiet block they fell into runs
  // again.
  bool resumed = !holdsDemand_;
  bool cut = resumed || (seq != 0 && lastSeq_ != 0 && seq > lastSeq_ + 1);
  lastSeq_ = resumed ? 0 : std::max(lastSeq_, seq);
  bool again = cut && ex_.noteInterrupted(index, upTo);
  // Back from parking with nothing measuring: this call switches the profiler on too late for itself, and the
  // next one has no timed predecessor to measure its cost from.
  if (resumed && !processMeasures) {
    ex_.noteUnmeasured(index);
    ex_.noteUnmeasured(index + 1);
  }
  return again;
}

bool Bucket::addSample(const Sample& s, const std::function<uint64_t()>& issued) {
  // Only a duel looks at how far the ranks got (every measured collective comes through here).
  bool duel = ex_.phase() == BucketExplorer::Phase::Exploring && ex_.stage() == BucketExplorer::kDuel;
  return ex_.addSample(s, duel ? issued() : UINT64_MAX);
}

bool Bucket::takeDemand(uint64_t tick) {
  lastTick_ = tick;
  if (holdsDemand_) return false;
  holdsDemand_ = true;
  return true;
}

bool Bucket::releaseDemand() {
  if (!holdsDemand_) return false;
  holdsDemand_ = false;
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
  if (ex_.phase() != BucketExplorer::Phase::Settled || !mayReexplore || nCands_ < 2 || !ex_.driftDetected())
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
    ex_.beginStage1(candidates(), start, p, adaptive, samplesPerCall, ncclIndex());
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
