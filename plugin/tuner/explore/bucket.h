// One (collective, size bucket) of a communicator in this process: its candidates, its explorer, the decision word
// the hot path reads, and the step pending after a round or a drift. Only this class moves a bucket between
// phases and rounds; the group (mutex held) tells it where its local ranks are and acts on what each step reports
// (profiler demand, log lines, the agreement across processes).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>

#include "tuner/explore/explorer.h"

namespace icn::tuner {

class Bucket {
 public:
  // What a step asks of the group's profiler demand.
  enum class Demand : uint8_t { Keep, Start, Stop };

  // Candidates (NCCL's cost order, adjusted by the group) and NCCL's own choice among them.
  std::array<Decision, BucketExplorer::kMaxArms> cands{};
  int nCands = 0;
  int ncclPick = -1;
  // The group's bookkeeping of profiler demand and of calls between this bucket's exploring calls.
  bool counted = false;
  uint64_t lastTick = 0;  // process-wide call tick of this bucket's latest exploring call
  uint64_t lastSeq = 0;   // the group's decision count at this bucket's latest exploring call

  // The explorer's per-call side (plan, samples, quiet blocks); its phase and round changes are this class's.
  const BucketExplorer& explorer() const { return ex_; }
  BucketExplorer& explorer() { return ex_; }
  BucketExplorer::Phase phase() const { return ex_.phase(); }
  // Settled decision for the lock-free read (0: take the slow path): decision + the first call it applies to.
  uint64_t word() const { return word_.load(); }

  // Settles on a persisted decision before the bucket was seen; false when it was seen already.
  bool settleCached(const Decision& d, double us);
  // First call: explores the candidates (true) or, with fewer than two, settles on NCCL's choice.
  bool begin(const ExploreParams& p, bool adaptive, int samplesPerCall);
  // Removes the candidates `skip` names, never NCCL's own choice (the reference); returns how many.
  template <typename Skip>
  int removeCandidates(const Decision& nccl, Skip skip) {
    int kept = 0;
    for (int i = 0; i < nCands; ++i) {
      const Decision& d = cands[i];
      bool isNccl = d.algo == nccl.algo && d.proto == nccl.proto;
      if (!isNccl && skip(d)) continue;
      cands[kept++] = d;
    }
    int removed = nCands - kept;
    nCands = kept;
    return removed;
  }

  // Ends the running round once its samples are in (or its calls ran out). `issued`: calls issued by the most
  // advanced local rank. With `mayCommit` (every rank local, online) a winner applies and the search goes on
  // (duel, channels) while the profiler keeps measuring; otherwise the round's end stops measuring.
  struct RoundEnd {
    bool ended = false;
    bool committed = false;
    CommitInfo info;
    Demand demand = Demand::Keep;
  };
  RoundEnd finishRound(const std::function<uint64_t()>& issued, bool mayCommit);
  // A measured drift (online, every rank local): a new stage-1 round is due. True when one was scheduled.
  bool noteDrift(bool mayReexplore);
  // Starts what a round or a drift left pending, once every local rank decided past the decision in force
  // (`decided`): history is only rewritten where no rank read it. `adaptive`, `samplesPerCall`: as for begin().
  Demand startPending(const std::function<uint64_t()>& issued, uint64_t decided, const ExploreParams& p,
                      bool adaptive, int samplesPerCall);
  // Publishes the settled decision for the hot path (nothing while a step is pending).
  void publish();

 private:
  std::atomic<uint64_t> word_{0};
  BucketExplorer ex_;
  bool pendingNext_ = false;       // a committed round continues: duel or stage 2
  bool pendingReexplore_ = false;  // drift: a new stage-1 round
};

}  // namespace icn::tuner
