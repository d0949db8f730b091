// Online search for one (collective, size bucket): a short exploration plan followed by a commit to the fastest
// measured candidate, then drift watching.
//
// Determinism matters more than cleverness here: every rank of a communicator must pick the same algorithm and
// protocol for the same call, or the collective hangs. The plan maps a call's index within the bucket to an arm;
// an entry is written once, before any rank can reach its index (extendPlan() is called under the group's lock
// with an index beyond every local rank's next call), and never rewritten. A measured decision only takes effect
// from an index no local rank has reached yet (`effectiveFrom`).
//
// Stage 1 ("screen, then confirm"), budget ~18 calls for 6 candidates:
//   - warm: `warmCalls` calls of the base (NCCL's choice): if the profiler was off, the first call is not timed
//     and the second has no timed predecessor to measure its cost from;
//   - screen: every algorithm/protocol pair NCCL marks supported, in NCCL's own cost order (cheapest first, a
//     neighbouring bucket's winner ahead of it), `callsPerArm` calls each;
//   - confirm (adaptive plans only): up to `confirmCalls` more calls for the leader and arms measured within
//     `keepRatio` of it, `confirmCalls x finalists` in all; clearly slower arms get nothing more.
// Adaptive plans need all ranks to share this state (all ranks in one process). Otherwise the plan is a pure
// function of the index (every arm `callsPerArm + confirmCalls` calls) so separate processes walk the same plan.
// Duel (adaptive plans, committed winners only): the best other arm when it was measured within `duelRatio` of
// the winner, NCCL's choice whenever the winner is another arm (host-bound rounds included), on one node also the
// arm of NCCL's algorithm with a clearly shorter stage-1 kernel (sameAlgoShorterKernel), and the winner run
// `duelCalls` more calls each, back to back in blocks (the winner's last), and are ranked on these fresh samples
// alone. Screening calls come in pairs right after another arm's, and some arms' first calls after a switch cost
// far less than back to back, so a winner chosen on its screening calls may rest on one lucky pair of samples.
// Across nodes (params.h) blocks are 8 calls and each arm is ranked on its latest 4 (`duelKeepCalls`):
// there the cost climbs over several calls. Samples of calls from before the duel, measured late, are kept out.
// Quiet duels (quietDuelCalls; the plugin's: 12 across nodes, none on one node): profiling slows some arms far
// more than others, because NCCL adds a proxy op per channel to read a timed kernel's timestamps. So a duel block
// is timed at only two calls
// (measures() tells the group when to switch NCCL's event mask, which NCCL reads as a call is enqueued, before it
// asks the tuner), and arms are ranked by spans: from the end of the first timed call to the end of the last, per
// call (`quietSpanCalls`: all after the block's first call, the one after the switch; across nodes the latest 8
// of 12). The runner-up within quietDuelRatio joins (stage 1 was timed at every call). A block that other
// buckets' calls cut is run again after the plan (noteInterrupted). Without a span for every arm (other buckets
// kept every call timed, or a rank fell out of step with the mask) the duel keeps its base. No stage 2 follows.
// Stage 2 (committed winners only): half and double the channel count the winner ran on, `channelCalls` each.
//
// Estimates are a low quantile of the samples after dropping each arm's first sample per local rank: with two
// ranks launched from one thread the first rank's kernel waits for the second one's launch, so half the samples
// carry launch skew; the first call of an arm may carry switching costs. Across nodes (params.h)
// periods are a trimmed mean instead and every arm's first call is dropped. Samples are attributed by
// what the profiler saw (algorithm, protocol, channels), not by index, so lagging or missing measurements stay
// correct.
//
// Each sample carries two times: the period (end of the previous collective to the end of this one: what a loop
// pays per call) and the kernel's own work time. Arms are ranked by the period. A round is host-bound when the
// fastest kernel's work time is below `hostBoundRatio` of the best period: the period is then mostly time the GPU
// waited for the host (inflated further by the profiler itself), the same for every arm whose GPU cost fits
// inside it, and its noise decides; such a round keeps the reference (NCCL's choice) unless its period is over
// `hostTieRatio` of the best. Small calls are host-bound, large ones are not; host-bound rounds do not rank by
// kernel time either, since that picks arms slower per call where NCCL's choice is already near the best.
// Communicators spanning nodes are never host-bound (the network wait is not in the kernel time reliably).
// docs/readme/tuner.md ("Why the rules are what they are", "Timing inside one process") has the measurements.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "telemetry/coll_names.h"
#include "tuner/store/decision.h"

namespace icn::tuner {

struct ExploreParams {
  int warmCalls = 2;           // stage 1 starts with this many calls of the base (they may run unmeasured)
  int callsPerArm = 2;         // ICN_TUNER_EXPLORE_CALLS: screening calls per candidate
  int confirmCalls = 2;        // extra calls for each finalist
  int finalists = 2;           // confirm budget: confirmCalls x finalists calls
  double keepRatio = 1.15;     // arms within this factor of the leader may take confirm calls
  double ncclMargin = 0.03;    // stage 1: another arm must be this much faster than NCCL's own choice ...
  double longCallMargin = 0.01; // ... or this much where NCCL's choice takes longCallUs or more a call: GPU-bound
  double longCallUs = 1000;     //     calls that long agree within ~1% (0: no exception; across nodes: ncclMargin)
  double hostBoundRatio = 0.5; // host-bound round: the fastest kernel is < this x the best period ...
  double hostTieRatio = 1.5;   // ... and then the reference stays unless its period is over this x the best
  bool meanPeriods = false;    // estimate periods by a trimmed mean instead of the lower quartile (across nodes)
  int dropFirstAfter = 2;      // an arm's first call is left out once this many more of its calls were measured
  int graceCalls = 8;          // after the plan: calls to wait for every planned sample before settling for
                               // "every arm has minSamples" (the rest may still be in flight)
  int minSamples = 2;          // usable samples (after dropping the first call's) NCCL's choice and a new choice
                               // both need before a round may leave NCCL's choice
  int giveUpCalls = 64;        // after the plan: calls of this bucket after which a round short of samples ends,
                               // keeping NCCL's choice ("not enough measurements")
  int duelCalls = 4;           // duel: calls per arm (0: no duel)
  int quietDuelCalls = 0;      // duel blocks of this many calls, timed at their first and last call only and ranked
                               // by spans (0 or < 3: every call timed, duelCalls a block); the plugin: across nodes
                               // ICN_TUNER_QUIET_DUEL (12), one node 0
  int quietSpanCalls = 0;      // calls a quiet block's span covers, ending with its last (0: all after the first;
                               // across nodes 8); the call before them is the block's other timed one
  double quietDuelRatio = 1.35;  // quiet duels take up to two other arms measured within this factor of the winner:
                                 // stage 1 was timed at every call, and the profiler's toll differs between arms
  int duelKeepCalls = 0;       // duel: rank on each arm's latest calls only (0: all but the first; across nodes 4)
  double duelRatio = 1.15;     // duel when the best other arm was measured within this factor of the winner
  int channelCalls = 2;        // stage 2: calls per channel variant
  bool channelStage = true;
  double driftRatio = 1.3;     // window estimate above reference x ratio ...
  double driftMinUs = 2.0;     // ... and by at least this much ...
  int driftWindow = 16;        // ... over this many samples ...
  int driftWindows = 2;        // ... this many windows in a row
  int maxReexplores = 4;
};

struct Sample {
  int algo = -1, proto = -1, channels = 0;
  double us = 0;        // period: previous collective's end to this one's end (cost per call in a loop)
  double kernelUs = 0;  // the kernel's own work time; 0 = unknown (then only periods rank arms)
  int calls = 1;        // > 1: a span: `us` is the cost per call over this many calls, only the last one timed
};

// One arm's estimate after a round: what a process reports to the agreement's leader.
struct ArmEstimate {
  Decision d;
  float us = 0;        // period estimate (0: unmeasured)
  uint16_t usable = 0;  // samples the estimate rests on
};

struct CommitInfo {
  Decision before, after;
  double afterUs = 0;
  std::string detail;  // "TREE/LL 13.8us(4) RING/LL 15.2us(4) ..."
  int stage = 1;       // BucketExplorer::kScreen, kChannels or kDuel
  int calls = 0;       // calls the round's plan used
  bool notEnough = false;  // the round gave up: too few measurements to leave NCCL's choice
  bool hostBound = false;  // host-bound round: the reference stayed unless its period was clearly worse
};

class BucketExplorer {
 public:
  static constexpr int kMaxArms = 24;
  static constexpr int kMaxPlan = 96;
  static constexpr int kRecent = 16;
  enum class Phase : uint8_t { Unseen, Exploring, Settled };
  static constexpr int kScreen = 1, kChannels = 2, kDuel = 3;  // stage()
  static const char* stageName(int stage);

  // Settle directly (rules/cache/default) without exploring: `d` applies from index `from`.
  void settle(const Decision& d, uint64_t from, double refUs);
  // Starts a stage-1 round at `start` with the given candidates (<= kMaxArms, no duplicates). `adaptive`: all
  // ranks share this explorer, so the plan may follow measurements. `samplesPerCall`: local ranks reporting.
  // `ncclPick`: index of NCCL's own choice among the candidates (-1: unknown); another arm must beat it by
  // `ncclMargin` to win, since a few GPU-timed samples cannot resolve smaller differences reliably.
  void beginStage1(std::span<const Decision> candidates, uint64_t start, const ExploreParams& p, bool adaptive,
                   int samplesPerCall, int ncclPick = -1);
  // Fixes the plan for every index below `upTo`. Must run (under the same lock as decisionFor) with `upTo` above
  // every index a local rank may evaluate next.
  void extendPlan(uint64_t upTo);
  Decision decisionFor(uint64_t index) const;
  // The call at `index` switched measuring on: NCCL read the profiler's event mask when it was enqueued, before
  // it asked the tuner, so none of its samples will come. The round does not wait for them.
  void noteUnmeasured(uint64_t index);
  // True when the sample matched an arm of the running round (or the settled decision, for drift). `issued`: calls
  // issued so far by the most advanced local rank; in a duel, samples of an arm that arrive before its block was
  // issued, or before any sample of the block ahead of it, are dropped (calls from before the duel, measured late).
  bool addSample(const Sample& s, uint64_t issued = UINT64_MAX);
  // Should the round end now? `issued` = calls issued so far by the most advanced local rank. Counted in host
  // calls, which may run far ahead of the GPU (nccl-tests enqueues all its iterations back to back; on the net
  // path 20 calls of 512 KiB take ~3 ms of GPU time): a round waits for its samples rather than for calls, and
  // samples that arrive after the host moved to other buckets still end it (Group::addSample).
  bool roundDone(uint64_t issued) const;
  // Ends the round: winner applies from max(effectiveFrom, plan end). With `mayCommit` false (ranks in other
  // processes) the winner is only remembered (learned()) and the base stays in force. Returns what changed.
  CommitInfo finishRound(uint64_t effectiveFrom, bool mayCommit);
  // Starts the duel after a committed stage 1; false when no other arm came close (or plans are fixed).
  bool beginDuel(uint64_t start);
  // Should the profiler time the call at `index`? False only inside a quiet duel's blocks (between their first
  // and last call); the caller switches NCCL's event mask before that call is enqueued.
  bool measures(uint64_t index) const;
  // A call of another bucket of this communicator came between this bucket's call `index` and the one before it:
  // the quiet block holding both, if its span covers them, has no valid span (NCCL's sequence numbers tell the
  // profiler so). Its arm gets another block at the end of the plan (once per block), starting no earlier than
  // `upTo` (ranks may have been given the winner for calls after the plan). Returns whether a block was added.
  bool noteInterrupted(uint64_t index, uint64_t upTo);
  bool quietDuel() const { return phase_ == Phase::Exploring && quiet_; }
  // Starts stage 2 (channels) after a committed stage 1 or duel; false when there is nothing to try.
  bool beginStage2(uint64_t start);
  // After a committed round: the duel, else stage 2 (when enabled); false when the search is over.
  bool beginNext(uint64_t start);
  // After settling: true when measured times drifted and a new stage-1 round is due.
  bool driftDetected();
  void noteReexplore() { ++reexplores_; }

  Phase phase() const { return phase_; }
  int stage() const { return stage_; }
  int reexplores() const { return reexplores_; }
  const Decision& current() const { return current_; }
  uint64_t currentFrom() const { return currentFrom_; }
  double currentUs() const { return currentUs_; }
  const Decision& learned() const { return learned_; }
  // After a stage-1 round: how much slower (algo, proto)'s period was than the fastest measured period (>= 1),
  // 0 when not measured; and that fastest period. Lets the next larger bucket skip arms that were far slower.
  float slowdown(int algo, int proto) const;
  double fastestPeriodUs() const { return fastestUs_; }
  double learnedUs() const { return learnedUs_; }
  uint64_t learnedSamples() const { return learnedSamples_; }
  bool planFinal() const { return planFinal_; }
  uint64_t planEnd() const { return start_ + static_cast<uint64_t>(planLen_); }
  // Each arm's estimate in the round just finished (or running); returns how many were written (<= kMaxArms).
  int armEstimates(std::array<ArmEstimate, kMaxArms>& out) const;
  // Most calls one stage-1 round plans (for the log and tests).
  static int stage1MaxCalls(int nCands, const ExploreParams& p, bool adaptive);

  // Low quantile of `n` samples (chronological order), dropping the first `drop` when enough remain.
  // `mean`: the mean without the largest and smallest sample instead (ExploreParams::meanPeriods).
  static double estimate(const float* v, int n, int drop, bool mean = false);

 private:
  struct Bin {
    Decision d;
    int chRel = 0;  // stage 2: -1 fewer channels than base, 0 same, +1 more
    uint32_t n = 0;
    uint16_t planned = 0;  // calls the plan gave this bin
    uint16_t unmeasured = 0;  // of those, calls made while the profiler was off (no samples will come)
    uint16_t confirms = 0;  // confirm calls the plan gave this bin
    std::array<float, kRecent> recent{};
    std::array<float, kRecent> recentKernel{};  // same slots as `recent`; 0 where unknown
    uint32_t kernelMissing = 0;                 // samples without a kernel time
    // Quiet duel: spans over the block's untimed calls (one per local rank), and the timed last call's kernel.
    std::array<float, kRecent> span{}, spanKernel{};
    uint32_t nSpan = 0;
    int chSeen = -1;  // channels seen most recently for this bin
  };
  int findBin(const Sample& s) const;
  double binEstimate(const Bin& b) const;        // period estimate
  double kernelEstimate(const Bin& b) const;     // kernel time estimate, 0 if some sample lacks one
  // `drop`: samples to leave out, oldest first, of those the ring still holds (min(n, kRecent)).
  static double ringEstimate(const std::array<float, kRecent>& ring, uint32_t n, uint32_t drop, bool mean);
  uint32_t dropFirst(uint32_t n) const;  // samples of the first call to leave out of an arm's n
  uint32_t dropHeld(const Bin& b) const;  // samples the estimates leave out of those b still holds
  // Host-bound round? (see the header comment)
  bool hostBound() const;
  uint32_t usable(const Bin& b) const;  // samples binEstimate() uses
  // A quiet duel with a span for every arm ranks on spans alone; without (other measurements kept every call
  // timed, or a rank lost step with the event mask) it has nothing to rank on.
  bool spanRanked() const;
  bool measured(const Bin& b) const { return spanRanked() ? b.nSpan > 0 : b.n > 0; }
  uint64_t blockLen() const;  // a duel's calls per block
  uint64_t spanLen() const;   // calls a quiet block's span covers
  // May the round leave its base for bin `win`? Both the winner and the reference (NCCL's choice in stage 1,
  // the unchanged channel count in stage 2) need minSamples usable samples; in stage 1 NCCL's choice itself only
  // wins against at least one other arm with minSamples.
  bool confident(int win) const;
  bool enoughAfterGrace() const;  // every arm measured enough to decide once the grace calls are over
  uint32_t needSamples(int bin) const;
  // Best bin by period, or the reference (NCCL's choice; stage 2: the unchanged channel count) unless another arm
  // beats it clearly: by ncclMargin, by kChannelWinRatio with no longer kernel (stage 2), or, in a host-bound round,
  // with a period over hostTieRatio better. -1 if none measured.
  int leader(bool hostBound) const;
  // Each measured arm's period estimate into `period` (0: unmeasured); returns the fastest arm (-1: none).
  int periodEstimates(std::array<double, kMaxArms>& period, double& fastestUs) const;
  // One node: an arm of the pick's algorithm with a kernel this much shorter (and a period within hostTieRatio of
  // the best) replaces the pick.
  int sameAlgoShorterKernel(int pick, const double* period, double bestUs) const;
  static constexpr double kSameAlgoKernelRatio = 0.85;
  static constexpr double kSameAlgoKernelMinUs = 3.0;
  // The duel's arms after stage 1 won by bin `win`: the challengers, then the winner (its block last).
  static constexpr int kMaxDuelArms = 5;
  struct DuelArms {
    std::array<int, kMaxDuelArms> bin{-1, -1, -1, -1, -1};
    int n = 0;
  };
  DuelArms duelArms(int win, bool quiet) const;
  // A finished round's measurements for its log line, and stage 1's slowdowns for the next larger bucket.
  std::string roundDetail(const std::array<double, kMaxArms>& period) const;
  void keepSlowdowns(const std::array<double, kMaxArms>& period, double fastest);
  int nextArm();       // next plan entry's bin, kWarm for a base call, -1 when the plan is complete
  static constexpr int kWarm = -2;
  void startRound(uint64_t start);

  ExploreParams p_;
  Phase phase_ = Phase::Unseen;
  int stage_ = 0;
  bool adaptive_ = false;
  bool quiet_ = false;  // the duel times only two calls of each block (set only while stage_ is kDuel)
  // Duel blocks in plan order: bin of each (one per arm, the winner's last; then re-runs of interrupted blocks).
  static constexpr int kMaxBlocks = 16;
  std::array<int8_t, kMaxBlocks> blockArm_{};
  std::array<bool, kMaxBlocks> blockSpoiled_{};
  int nBlocks_ = 0;
  int spc_ = 1;
  std::array<Bin, kMaxArms> bins_{};
  int nBins_ = 0;
  int ncclPick_ = -1;  // stage 1: NCCL's own choice
  // plan
  std::array<int8_t, kMaxPlan> plan_{};
  int planLen_ = 0;
  bool planFinal_ = false;
  Decision tail_;      // after the plan, until the round ends
  int confirms_ = 0;
  uint64_t start_ = 0;
  int baseChannels_ = 0;  // stage 2: channels the stage-1 winner ran on
  Decision base_;         // before the round's start
  Decision current_;
  uint64_t currentFrom_ = 0;
  double currentUs_ = 0;
  Decision learned_;
  double learnedUs_ = 0;
  uint64_t learnedSamples_ = 0;
  // drift
  std::array<float, 64> driftBuf_{};
  int driftN_ = 0, driftHits_ = 0, reexplores_ = 0;
  // Last stage-1 round: period / fastest period per (algo, proto), 0 = unmeasured; and the fastest period.
  std::array<float, coll::kNumAlgos * coll::kNumProtos + 1> slowdown_{};  // + a slot for out-of-range arms
  static int slotOf(const Decision& d);
  double fastestUs_ = 0;
};

}  // namespace icn::tuner
