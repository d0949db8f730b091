// One (collective, size bucket) of a communicator in this process: its candidates, its explorer, its hold on the
// profiler, the decision word the hot path reads, and the step pending after a round or a drift. Only this class
// moves a bucket between phases and rounds; the group (mutex held) tells it where its local ranks are and acts on
// what each step reports (profiler demand, log lines, the agreement across processes).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>

#include "tuner/explore/explorer.h"
#include "tuner/store/cost_table.h"

namespace icn::tuner {

class Bucket {
 public:
  // What a step asks of the group's profiler demand.
  enum class Demand : uint8_t { Keep, Start, Stop };
  // What the bucket's rounds learned (samples 0: nothing yet).
  struct Learned {
    Decision d;
    double us = 0;
    uint64_t samples = 0;
  };

  // The explorer's estimates and rounds, for logs and for a neighbouring bucket; only this class changes it.
  const BucketExplorer& explorer() const { return ex_; }
  BucketExplorer::Phase phase() const { return ex_.phase(); }
  // Settled decision for the lock-free read (0: take the slow path): decision + the first call it applies to.
  uint64_t word() const { return word_.load(); }
  Learned learned() const { return Learned{ex_.learned(), ex_.learnedUs(), ex_.learnedSamples()}; }

  // Candidates, chosen before the first call: the pairs `table` supports in NCCL's cost order (its own choice
  // first), at most BucketExplorer::kMaxArms.
  void takeCandidates(const CostTable& table);
  // Moves `d` to the front when it is a later candidate (a neighbouring bucket's winner is screened first).
  void moveToFront(const Decision& d);
  // Removes the candidates `skip` names, never NCCL's own choice (the reference); returns how many.
  template <typename Skip>
  int removeCandidates(Skip skip) {
    int kept = 0;
    for (int i = 0; i < nCands_; ++i) {
      const Decision& d = cands_[i];
      bool isNccl = d.algo == ncclChoice_.algo && d.proto == ncclChoice_.proto;
      if (!isNccl && skip(d)) continue;
      cands_[kept++] = d;
    }
    int removed = nCands_ - kept;
    nCands_ = kept;
    return removed;
  }
  std::span<const Decision> candidates() const { return {cands_.data(), static_cast<size_t>(nCands_)}; }
  // NCCL's own choice among the candidates; none (Decision{}) when it is not one of them.
  Decision ncclChoice() const;

  // Settles on a persisted decision before the bucket was seen; false when it was seen already.
  bool settleCached(const Decision& d, double us);
  // First call: explores the candidates (true) or, with fewer than two, settles on NCCL's choice.
  bool begin(const ExploreParams& p, bool adaptive, int samplesPerCall);

  // The plan, fixed for every call below `upTo` (above every index a local rank may ask for before the group's
  // lock is taken again), and the decision for the call at `index`.
  void extendPlan(uint64_t upTo) { ex_.extendPlan(upTo); }
  Decision decisionFor(uint64_t index) const { return ex_.decisionFor(index); }
  // An exploring call at `index`. `seq`: the group's decision count with it (0: not counted); `upTo`: as for
  // extendPlan; `processMeasures`: the profiler times calls already. True when other buckets' calls cut a quiet
  // block, which runs again.
  bool noteExploringCall(uint64_t index, uint64_t seq, uint64_t upTo, bool processMeasures);
  // A quiet duel asks for the call at `nextEnqueued` untimed.
  bool wantsQuiet(uint64_t nextEnqueued) const { return ex_.quietDuel() && !ex_.measures(nextEnqueued); }
  // A measured collective of this bucket; false when it matched nothing. `issued`: as for finishRound.
  bool addSample(const Sample& s, const std::function<uint64_t()>& issued);
  // Each arm's estimate in the round just finished; returns how many were written.
  int armEstimates(std::array<ArmEstimate, BucketExplorer::kMaxArms>& out) const { return ex_.armEstimates(out); }

  // The bucket's hold on the process's profiler demand: taken while it explores, given back when it idles or the
  // search ends. takeDemand (at process call tick `tick`) and releaseDemand return whether the hold changed.
  bool holdsDemand() const { return holdsDemand_; }
  bool takeDemand(uint64_t tick);
  bool releaseDemand();
  // Holds demand but made no exploring call for more than `idleCalls` ticks before `tick`.
  bool idle(uint64_t tick, uint64_t idleCalls) const { return holdsDemand_ && tick > lastTick_ + idleCalls; }

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
  int ncclIndex() const;  // of NCCL's own choice among the candidates, -1 when it is none of them

  std::atomic<uint64_t> word_{0};
  BucketExplorer ex_;
  bool pendingNext_ = false;       // a committed round continues: duel or stage 2
  bool pendingReexplore_ = false;  // drift: a new stage-1 round
  std::array<Decision, BucketExplorer::kMaxArms> cands_{};
  int nCands_ = 0;
  Decision ncclChoice_;        // NCCL's choice in the table the candidates came from
  bool holdsDemand_ = false;
  uint64_t lastTick_ = 0;  // process-wide call tick of this bucket's latest exploring call
  uint64_t lastSeq_ = 0;   // the group's decision count at this bucket's latest exploring call
};

}  // namespace icn::tuner
