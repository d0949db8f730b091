// Online search for one (collective, size bucket): a deterministic, bounded exploration schedule followed by a
// commit to the fastest measured candidate, then drift watching.
//
// Determinism matters more than cleverness here: every rank of a communicator must pick the same algorithm and
// protocol for the same call, or the collective hangs. So the candidate for a call is a pure function of the call's
// index within the bucket (index -> arm, `callsPerArm` consecutive calls per arm), and a measured decision only
// takes effect from an index no local rank has reached yet (`effectiveFrom`). Measurements (which differ per rank)
// only ever choose *which* decision is committed, never what a given index means retroactively.
//
// Stage 1 tries every algorithm/protocol pair NCCL marks supported, with NCCL's channel count. Stage 2 (when
// committing is allowed) tries half and double the channel count the winner ran on. Samples are attributed by what
// the profiler saw (algorithm, protocol, channels), not by index, so lagging or sampled measurements stay correct.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "tuner/decision.h"

namespace icn::tuner {

struct ExploreParams {
  int callsPerArm = 4;         // ICN_TUNER_EXPLORE_CALLS
  int minSamples = 3;          // per arm before a round may commit
  int timeoutCalls = 256;      // calls after the schedule ended: commit with what we have
  bool channelStage = true;
  double driftRatio = 1.3;     // window median above reference x ratio ...
  double driftMinUs = 2.0;     // ... and by at least this much ...
  int driftWindow = 16;        // ... over this many samples ...
  int driftWindows = 2;        // ... this many windows in a row
  int maxReexplores = 4;
};

struct Sample {
  int algo = -1, proto = -1, channels = 0;
  double us = 0;
};

struct CommitInfo {
  Decision before, after;
  double afterUs = 0;
  std::string detail;  // "TREE/LL 13.8us(4) RING/LL 15.2us(4) ..."
  int stage = 1;
};

class BucketExplorer {
 public:
  static constexpr int kMaxArms = 24;
  static constexpr int kRecent = 16;
  enum class Phase : uint8_t { Unseen, Exploring, Settled };

  // Settle directly (rules/cache/default) without exploring: `d` applies from index `from`.
  void settle(const Decision& d, uint64_t from, double refUs);
  // Starts a stage-1 round at `start` with the given algorithm/protocol candidates (<= kMaxArms, no duplicates).
  void beginStage1(std::span<const Decision> candidates, uint64_t start, int callsPerArm);
  Decision decisionFor(uint64_t index) const;
  // True when the sample matched an arm of the running round (or the settled decision, for drift).
  bool addSample(const Sample& s);
  // Should the round end now? `issued` = calls issued so far by the most advanced local rank.
  bool roundDone(uint64_t issued, const ExploreParams& p) const;
  // Ends the round: winner applies from `effectiveFrom`. With `mayCommit` false (ranks in other processes) the
  // winner is only remembered (learned()) and NCCL's default stays in force. Returns what changed, for the log.
  CommitInfo finishRound(uint64_t effectiveFrom, bool mayCommit);
  // Starts stage 2 (channels) after a committed stage 1; false when there is nothing to try.
  bool beginStage2(uint64_t start, int callsPerArm);
  // After settling: true when measured times drifted and a new stage-1 round is due.
  bool driftDetected(const ExploreParams& p);
  void noteReexplore() { ++reexplores_; }

  Phase phase() const { return phase_; }
  int stage() const { return stage_; }
  int reexplores() const { return reexplores_; }
  const Decision& current() const { return current_; }
  uint64_t currentFrom() const { return currentFrom_; }
  double currentUs() const { return currentUs_; }
  const Decision& learned() const { return learned_; }
  double learnedUs() const { return learnedUs_; }
  uint64_t learnedSamples() const { return learnedSamples_; }
  uint64_t scheduleEnd() const { return start_ + static_cast<uint64_t>(nScheduled_) * perArm_; }

 private:
  struct Bin {
    Decision d;
    int chRel = 0;  // stage 2: -1 fewer channels than base, 0 same, +1 more
    uint32_t n = 0;
    std::array<float, kRecent> recent{};
    int chSeen = -1;  // channels seen most recently for this bin
    double median() const;
  };
  int findBin(const Sample& s) const;

  Phase phase_ = Phase::Unseen;
  int stage_ = 0;
  std::array<Bin, kMaxArms> bins_{};
  int nBins_ = 0;
  int firstScheduled_ = 0, nScheduled_ = 0;  // bins [first, first+n) are walked by the schedule
  uint64_t start_ = 0;
  int perArm_ = 1;
  int baseChannels_ = 0;  // stage 2: channels the stage-1 winner ran on
  Decision base_;         // outside the schedule (before start / after its end) until a commit
  Decision current_;
  uint64_t currentFrom_ = 0;
  double currentUs_ = 0;
  Decision learned_;
  double learnedUs_ = 0;
  uint64_t learnedSamples_ = 0;
  // drift
  std::array<float, 64> driftBuf_{};
  int driftN_ = 0, driftHits_ = 0, reexplores_ = 0;
};

}  // namespace icn::tuner
