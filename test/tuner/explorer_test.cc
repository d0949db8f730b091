#include <gtest/gtest.h>

#include <vector>

#include "tuner/explore/explorer.h"

using namespace icn::tuner;

namespace {
std::vector<Decision> sixCandidates() {
  std::vector<Decision> v;
  for (int8_t a = 0; a < 2; ++a)
    for (int8_t p = 0; p < 3; ++p) v.push_back(Decision{a, p, 0});
  return v;
}

ExploreParams params(int screen, int confirm) {
  ExploreParams p;
  p.warmCalls = 0;  // most tests look at the arms only; WarmCallsRunTheBase covers them
  p.callsPerArm = screen;
  p.confirmCalls = confirm;
  return p;
}

// Feeds `n` samples of candidate `d` at `us` (plus `spread` x i).
void feed(BucketExplorer& ex, const Decision& d, int n, double us, double spread = 0, int ch = 8) {
  for (int i = 0; i < n; ++i) ex.addSample(Sample{d.algo, d.proto, ch, us + spread * i});
}

// A committed adaptive stage 1 (one screening call per arm, nothing to confirm) that c[4] won: `samples` per arm,
// c[4] at `winUs`, every other arm at `othersUs`.
void commitStage1OnC4(BucketExplorer& ex, const std::vector<Decision>& c, int spc, int samples, double winUs,
                      double othersUs) {
  ex.beginStage1(c, 0, params(1, 0), true, spc);
  ex.extendPlan(100);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], samples, k == 4 ? winUs : othersUs);
  ex.finishRound(6, true);
}
}  // namespace

TEST(Explorer, EstimateIsALowQuantileWithoutTheFirstSample) {
  const float v[] = {50, 10, 30, 11, 12};
  EXPECT_EQ(BucketExplorer::estimate(v, 5, 1), 10.f);  // 50 (first) dropped; lower quartile of 10,30,11,12
  const float w[] = {9, 30};
  EXPECT_EQ(BucketExplorer::estimate(w, 2, 1), 9.f);  // never drops below two samples
  const float skew[] = {20, 12, 20, 12, 20, 12, 20, 12};  // half the samples carry launch skew
  EXPECT_EQ(BucketExplorer::estimate(skew, 8, 2), 12.f);
  // Trimmed mean (across nodes): an alternating pair averages out, one outlier (and the smallest) is dropped.
  const float alt[] = {6, 50, 6, 50};
  EXPECT_DOUBLE_EQ(BucketExplorer::estimate(alt, 4, 0, true), 28.0);
  const float out[] = {10, 11, 90, 12, 9};
  EXPECT_DOUBLE_EQ(BucketExplorer::estimate(out, 5, 0, true), 11.0);
  EXPECT_DOUBLE_EQ(BucketExplorer::estimate(alt, 2, 0, true), 28.0);  // two samples: plain mean
  // Interquartile mean: two 3x outliers among ten samples stay out, an alternating pattern still averages.
  const float two[] = {500, 1500, 510, 520, 490, 1550, 500, 510, 505, 495};
  EXPECT_NEAR(BucketExplorer::estimate(two, 10, 0, true), 505.0, 5.0);
  const float alt8[] = {6, 50, 6, 50, 6, 50, 6, 50};
  EXPECT_DOUBLE_EQ(BucketExplorer::estimate(alt8, 8, 0, true), 28.0);
}

TEST(Explorer, FixedPlanIsAPureFunctionOfTheIndex) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(2, 2);
  ex.beginStage1(c, 0, p, /*adaptive=*/false, 1);
  ex.extendPlan(100);
  ASSERT_TRUE(ex.planFinal());
  EXPECT_EQ(ex.planEnd(), 24u);
  EXPECT_EQ(BucketExplorer::stage1MaxCalls(6, p, false), 24);
  for (uint64_t i = 0; i < 24; ++i) EXPECT_EQ(ex.decisionFor(i), c[i / 4]) << i;
  EXPECT_FALSE(ex.decisionFor(24).valid());  // after the plan: base (NCCL's default)
  // Samples do not change what an index means.
  feed(ex, c[4], 3, 3.0);
  for (uint64_t i = 0; i < 24; ++i) EXPECT_EQ(ex.decisionFor(i), c[i / 4]);
}

// Adaptive plan: screen every arm twice, confirm the leader and a close second; a clearly slower arm gets nothing
// more, and the whole stage fits in 16 calls for six candidates.
TEST(Explorer, ScreenThenConfirmOnlyTheClosest) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(2, 2);
  ex.beginStage1(c, 0, p, /*adaptive=*/true, 2);
  const double times[6] = {20, 18, 30, 15, 9, 9.5};  // RING/LL128 fastest, RING/SIMPLE close
  uint64_t next = 0;
  // Samples arrive two calls late, as from a real profiler.
  std::vector<std::pair<int, uint64_t>> issued;
  while (!ex.planFinal() || next < ex.planEnd()) {
    ex.extendPlan(next + 3);
    Decision d = ex.decisionFor(next);
    int arm = -1;
    for (int k = 0; k < 6; ++k)
      if (c[k] == d) arm = k;
    ASSERT_GE(arm, 0) << "index " << next;
    issued.push_back({arm, next});
    if (next >= 2) {
      int a = issued[next - 2].first;
      feed(ex, c[a], 1, times[a] + 6);  // rank 0 waits for rank 1's launch
      feed(ex, c[a], 1, times[a]);
    }
    ++next;
    ASSERT_LT(next, 40u);
  }
  EXPECT_LE(ex.planEnd(), 16u);
  EXPECT_LE(ex.planEnd(), static_cast<uint64_t>(BucketExplorer::stage1MaxCalls(6, p, true)));
  int confirms[6] = {};
  for (size_t i = 12; i < issued.size(); ++i) confirms[issued[i].first]++;
  // The first confirm call is handed out before RING/LL128's screening samples are in (lag): it goes to the leader
  // of that moment; the rest go to the real leader and the close second.
  EXPECT_EQ(confirms[4], 2);
  EXPECT_GE(confirms[5], 1);
  EXPECT_EQ(confirms[0] + confirms[1] + confirms[2], 0) << "clearly slower arms are not confirmed";
  EXPECT_EQ(ex.decisionFor(ex.planEnd()), c[4]) << "after the plan the leader runs until the round ends";
  EXPECT_FALSE(ex.roundDone(ex.planEnd() - 1));
  for (int a = 0; a < 6; ++a) feed(ex, c[a], 4, times[a]);
  EXPECT_TRUE(ex.roundDone(ex.planEnd()));
  CommitInfo ci = ex.finishRound(ex.planEnd(), true);
  EXPECT_EQ(ci.after, c[4]);
  EXPECT_NEAR(ci.afterUs, 9.0, 1e-6);
  EXPECT_EQ(ex.decisionFor(3), c[1]) << "a lagging rank still follows the plan";
}

TEST(Explorer, LeaderOnlyWhenNothingIsClose) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, params(1, 2), true, 1);
  ex.extendPlan(6);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, k == 2 ? 5.0 : 20.0);
  ex.extendPlan(100);
  EXPECT_EQ(ex.planEnd(), 8u);
  EXPECT_EQ(ex.decisionFor(6), c[2]);
  EXPECT_EQ(ex.decisionFor(7), c[2]);
}

TEST(Explorer, GraceEndsARoundWithMissingSamples) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(2, 0);
  p.graceCalls = 5;
  ex.beginStage1(c, 0, p, true, 1);
  ex.extendPlan(100);
  ASSERT_EQ(ex.planEnd(), 12u);
  feed(ex, c[2], 2, 50);
  feed(ex, c[5], 2, 40);
  EXPECT_FALSE(ex.roundDone(11));
  EXPECT_FALSE(ex.roundDone(16));
  // Four arms have no samples yet (they may be in flight: the host runs ahead of the GPU): the round waits past
  // the grace calls, up to the give-up cap.
  EXPECT_FALSE(ex.roundDone(17));
  EXPECT_FALSE(ex.roundDone(12 + 63));
  EXPECT_TRUE(ex.roundDone(12 + 64));
  // Both finalists were measured enough to compare: the faster one is committed.
  EXPECT_EQ(ex.finishRound(12 + 64, true).after, c[5]);
}

TEST(Explorer, GraceEndsARoundOnceEveryArmHasMinSamples) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(2, 0);
  p.graceCalls = 5;
  ex.beginStage1(c, 0, p, true, /*samplesPerCall=*/2);
  ex.extendPlan(100);
  // Each arm's 2 calls give 4 samples on two ranks; 2 of them are in: enough to compare, the rest in flight.
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 2, k == 5 ? 40.0 : 50.0);
  EXPECT_FALSE(ex.roundDone(16));
  EXPECT_TRUE(ex.roundDone(17));
  EXPECT_EQ(ex.finishRound(17, true).after, c[5]);
}

TEST(Explorer, NoCommitRemembersTheWinnerOnly) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, params(1, 0), false, 1);
  ex.extendPlan(100);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, 10.0 + k);
  ASSERT_TRUE(ex.roundDone(6));
  CommitInfo ci = ex.finishRound(3, /*mayCommit=*/false);
  EXPECT_FALSE(ci.after.valid());
  EXPECT_EQ(ex.currentFrom(), 6u) << "never before the end of the fixed plan";
  EXPECT_FALSE(ex.decisionFor(100).valid());
  EXPECT_EQ(ex.learned(), c[0]);
  EXPECT_EQ(ex.learnedUs(), 10.0);
}

TEST(Explorer, ChannelStageAttributesByObservedChannels) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(1, 0);
  ex.beginStage1(c, 0, p, true, 1);
  ex.extendPlan(100);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, k == 4 ? 10.0 : 20.0);
  ex.finishRound(6, true);
  ASSERT_TRUE(ex.beginStage2(6));
  ex.extendPlan(100);
  EXPECT_EQ(ex.planEnd(), 10u);
  EXPECT_EQ(ex.decisionFor(6), (Decision{1, 1, 4}));
  EXPECT_EQ(ex.decisionFor(8), (Decision{1, 1, 16}));
  EXPECT_EQ(ex.decisionFor(5), (Decision{1, 1, 0}));
  EXPECT_EQ(ex.decisionFor(10), (Decision{1, 1, 0}));
  feed(ex, c[4], 2, 7.0, 0, 3);    // asked for 4, ran on 3: still "fewer"
  feed(ex, c[4], 2, 12.0, 0, 16);
  feed(ex, c[0], 1, 1.0, 0, 4);    // another pair: not part of this round
  EXPECT_TRUE(ex.roundDone(10));
  CommitInfo ci = ex.finishRound(10, true);
  EXPECT_EQ(ci.after, (Decision{1, 1, 4}));
  EXPECT_EQ(ci.stage, 2);
}

// Stage 1 won on a lucky screen: the duel re-runs the winner, the best other arm and NCCL's choice (both within
// duelRatio) in blocks, challengers first, and ranks them on the fresh samples only.
TEST(Explorer, DuelRerunsTheClosestArmsOnFreshSamples) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(1, 0);
  ex.beginStage1(c, 0, p, true, 1, /*ncclPick=*/5);
  ex.extendPlan(100);
  const double screen[6] = {40, 30, 12.0, 60, 13.0, 13.5};  // c[2] lucky; c[4] best other; c[5] NCCL's
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, screen[k]);
  ASSERT_EQ(ex.finishRound(6, true).after, c[2]);
  ASSERT_TRUE(ex.beginNext(6));
  EXPECT_EQ(ex.stage(), BucketExplorer::kDuel);
  ex.extendPlan(100);
  EXPECT_EQ(ex.planEnd(), 6u + 12u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(ex.decisionFor(6 + i), c[4]) << i;
  for (uint64_t i = 4; i < 8; ++i) EXPECT_EQ(ex.decisionFor(6 + i), c[5]) << i;
  for (uint64_t i = 8; i < 12; ++i) EXPECT_EQ(ex.decisionFor(6 + i), c[2]) << i;
  EXPECT_EQ(ex.decisionFor(18), c[2]) << "the stage-1 winner runs after the plan";
  EXPECT_EQ(ex.decisionFor(5), c[2]) << "before the duel: the stage-1 winner";
  feed(ex, c[2], 4, 14.0);  // back to back the lucky arm is slower
  feed(ex, c[4], 4, 13.0);
  feed(ex, c[5], 4, 13.2);  // NCCL's choice: RING/LL128 is not 3% faster, NCCL's choice stays
  ASSERT_TRUE(ex.roundDone(18));
  CommitInfo ci = ex.finishRound(18, true);
  EXPECT_EQ(ci.stage, BucketExplorer::kDuel);
  EXPECT_EQ(ci.before, c[2]);
  EXPECT_EQ(ci.after, c[5]);
  EXPECT_EQ(ex.learned(), c[5]);
  ASSERT_TRUE(ex.beginNext(18)) << "then the channel stage, on the duel's winner";
  EXPECT_EQ(ex.stage(), BucketExplorer::kChannels);
  ex.extendPlan(100);
  EXPECT_EQ(ex.decisionFor(18), (Decision{1, 2, 4}));
}

TEST(Explorer, NoDuelWhenNothingCameClose) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4(ex, c, 1, 1, 10.0, 11.6);  // the others 16% slower
  EXPECT_FALSE(ex.beginDuel(6));
  ASSERT_TRUE(ex.beginNext(6));
  EXPECT_EQ(ex.stage(), BucketExplorer::kChannels);
}

TEST(Explorer, NoDuelWithFixedPlans) {
  BucketExplorer ex;  // ranks in other processes: nothing measured may shape a plan
  auto c = sixCandidates();
  ex.beginStage1(c, 0, params(1, 0), false, 1);
  ex.extendPlan(100);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, 10.0 + 0.1 * k);
  ex.finishRound(6, true);
  EXPECT_FALSE(ex.beginDuel(6));
}

TEST(Explorer, DuelWaitsForItsBlocks) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4(ex, c, 2, 2, 10.0, 10.5);
  ASSERT_TRUE(ex.beginDuel(6));
  ex.extendPlan(100);
  uint64_t end = ex.planEnd();
  ASSERT_EQ(end, 6u + 8u);
  ASSERT_EQ(ex.decisionFor(6), c[0]);  // the challenger's block (first of the tied others), then the winner's
  ASSERT_EQ(ex.decisionFor(10), c[4]);
  // The first call of each block arrived (a switch made it fast); the rest is still in flight.
  feed(ex, c[0], 2, 8.0);
  feed(ex, c[4], 2, 7.0);
  EXPECT_FALSE(ex.roundDone(end + 20)) << "two of eight samples per arm: not a duel yet";
  feed(ex, c[0], 4, 9.0);
  feed(ex, c[4], 4, 12.0);
  EXPECT_TRUE(ex.roundDone(end + 20)) << "all but one call's samples: enough";
  EXPECT_EQ(ex.finishRound(end + 20, true).after, c[0]);
}

TEST(Explorer, DuelShortOfSamplesKeepsTheStage1Winner) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4(ex, c, 1, 1, 10.0, 10.5);
  ASSERT_TRUE(ex.beginDuel(6));
  ex.extendPlan(100);
  uint64_t end = ex.planEnd();
  ASSERT_TRUE(ex.roundDone(end + 64)) << "gives up after the cap";
  CommitInfo ci = ex.finishRound(end + 64, true);
  EXPECT_TRUE(ci.notEnough);
  EXPECT_EQ(ci.after, c[4]);
  EXPECT_EQ(ex.decisionFor(end + 100), c[4]);
}

TEST(Explorer, ChannelStageNeedsAClearWin) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4(ex, c, 1, 1, 10.0, 20.0);
  ASSERT_TRUE(ex.beginStage2(6));
  ex.extendPlan(100);
  feed(ex, c[4], 2, 9.5, 0, 4);  // 5% better: within noise
  feed(ex, c[4], 2, 11.0, 0, 16);
  EXPECT_EQ(ex.finishRound(10, true).after, (Decision{1, 1, 0}));
}

// While it measures, the profiler adds host work per channel, so fewer channels can show a shorter period only
// because the host kept up better. 2 H200 NVLink, 2 MiB: Ring/LL128 with 12 channels 34.6 us a period against 39.4
// with 24, kernels 23.7 vs 20.0 us (unprofiled, 24 channels are faster). A shorter period wins a channel variant
// only with a kernel that is not longer.
TEST(Explorer, ChannelStageDistrustsAShorterPeriodWithALongerKernel) {
  for (double fewerKernelUs : {23.7, 19.0}) {
    BucketExplorer ex;
    auto c = sixCandidates();
    ex.beginStage1(c, 0, params(1, 0), true, 1);
    ex.extendPlan(100);
    for (int k = 0; k < 6; ++k) ex.addSample(Sample{c[k].algo, c[k].proto, 8, k == 4 ? 39.4 : 60.0, k == 4 ? 20.0 : 50.0});
    ex.finishRound(6, true);
    ASSERT_EQ(ex.current(), c[4]);
    ASSERT_TRUE(ex.beginStage2(6));
    ex.extendPlan(100);
    for (int i = 0; i < 4; ++i) ex.addSample(Sample{1, 1, 8, 39.4, 20.0});
    for (int i = 0; i < 2; ++i) ex.addSample(Sample{1, 1, 4, 34.6, fewerKernelUs});
    for (int i = 0; i < 2; ++i) ex.addSample(Sample{1, 1, 16, 45.0, 19.5});
    Decision after = ex.finishRound(10, true).after;
    if (fewerKernelUs > 20.0)
      EXPECT_EQ(after, (Decision{1, 1, 0})) << "the longer kernel gives the shorter period away";
    else
      EXPECT_EQ(after, (Decision{1, 1, 4})) << "shorter period and no longer kernel: fewer channels win";
  }
}

TEST(Explorer, DriftNeedsSustainedSlowdown) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(1, 0);
  p.driftWindow = 8;
  p.driftWindows = 2;
  ex.beginStage1(c, 0, p, true, 1);
  ex.extendPlan(100);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, k == 4 ? 10.0 : 20.0);
  ex.finishRound(6, true);
  ASSERT_EQ(ex.current(), c[4]);
  // Noise, spikes and launch skew on every other sample: no drift.
  for (int i = 0; i < 64; ++i) {
    ex.addSample(Sample{1, 1, 8, i % 7 == 0 ? 40.0 : (i % 2 ? 16.0 : 10.0 + (i % 3) * 0.5)});
    EXPECT_FALSE(ex.driftDetected()) << i;
  }
  // Samples of other candidates are not evidence.
  for (int i = 0; i < 32; ++i) {
    ex.addSample(Sample{0, 0, 8, 100.0});
    EXPECT_FALSE(ex.driftDetected());
  }
  // Sustained 2x slowdown: detected after two windows.
  int detectedAt = -1;
  for (int i = 0; i < 32 && detectedAt < 0; ++i) {
    ex.addSample(Sample{1, 1, 8, 20.0});
    if (ex.driftDetected()) detectedAt = i;
  }
  EXPECT_EQ(detectedAt, 15);
}

TEST(Explorer, DriftIsBounded) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(1, 0);
  p.driftWindow = 2;
  p.driftWindows = 1;
  p.maxReexplores = 2;
  ex.beginStage1(c, 0, p, true, 1);
  ex.extendPlan(100);
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, k == 4 ? 10.0 : 20.0);
  ex.finishRound(6, true);
  int detections = 0;
  for (int i = 0; i < 100; ++i) {
    ex.addSample(Sample{1, 1, 8, 50.0});
    if (ex.driftDetected()) {
      ++detections;
      ex.noteReexplore();
    }
  }
  EXPECT_EQ(detections, 2);
}

// Leaving NCCL's own choice must pay at least ncclMargin (3%): smaller measured gains are within what a few
// GPU-timed samples can resolve.
TEST(Explorer, NcclChoiceKeepsSmallMeasuredDifferences) {
  auto c = sixCandidates();
  for (double other : {9.8, 9.0}) {
    BucketExplorer ex;
    ex.beginStage1(c, 0, params(1, 0), true, 1, /*ncclPick=*/3);
    ex.extendPlan(100);
    for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, k == 3 ? 10.0 : k == 5 ? other : 20.0);
    Decision want = other > 9.7 ? c[3] : c[5];
    EXPECT_EQ(ex.finishRound(6, true).after, want) << other;
  }
}

// Calls of a millisecond and more are GPU-bound and agree within ~1% (2 H200 NVLink, 2 GiB: Tree/SIMPLE 2.6% faster
// than NCCL's Ring/SIMPLE, kept by the 3% margin in five of five duels): there 1% decides, unless the parameters
// say otherwise (across nodes Group keeps 3%).
TEST(Explorer, LongCallsLeaveNcclsChoiceForASmallerMeasuredGain) {
  auto c = sixCandidates();
  struct Case {
    double scale, longCallMargin;
    bool leaves;
  };
  for (Case k : {Case{1.0, 0.01, false}, Case{600.0, 0.01, true}, Case{600.0, 0.03, false}}) {
    BucketExplorer ex;
    ExploreParams p = params(1, 0);
    p.longCallMargin = k.longCallMargin;
    ex.beginStage1(c, 0, p, true, 1, /*ncclPick=*/5);
    ex.extendPlan(100);
    // NCCL's Ring/SIMPLE at 10.4 x scale, Tree/SIMPLE 2.3% faster, the rest far behind.
    for (int i = 0; i < 6; ++i) feed(ex, c[i], 1, k.scale * (i == 5 ? 10.4 : i == 2 ? 10.16 : 15.0));
    EXPECT_EQ(ex.finishRound(6, true).after, k.leaves ? c[2] : c[5]) << k.scale << " " << k.longCallMargin;
  }
}

// Stage 1 starts with calls of the base: when the profiler was off, the first call is not timed and the second
// has no timed predecessor. They belong to no arm, so the round does not wait for their samples.
TEST(Explorer, WarmCallsRunTheBase) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(1, 0);
  p.warmCalls = 2;
  ex.beginStage1(c, 0, p, true, 1);
  ex.extendPlan(100);
  EXPECT_EQ(ex.planEnd(), 8u);
  EXPECT_FALSE(ex.decisionFor(0).valid());
  EXPECT_FALSE(ex.decisionFor(1).valid());
  for (uint64_t i = 2; i < 8; ++i) EXPECT_EQ(ex.decisionFor(i), c[i - 2]);
  ex.noteUnmeasured(1);  // harmless on a warm call
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 1, k == 1 ? 5.0 : 9.0);
  EXPECT_TRUE(ex.roundDone(8));
  EXPECT_EQ(ex.finishRound(8, true).after, c[1]);
}

// A call made while nothing measured gives no samples: the round does not wait the grace period for it.
TEST(Explorer, UnmeasuredCallsAreNotAwaited) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(2, 0);
  p.graceCalls = 50;
  ex.beginStage1(c, 0, p, true, 1);
  ex.extendPlan(100);
  ex.noteUnmeasured(4);
  ex.noteUnmeasured(5);  // both calls of arm 2
  for (int k = 0; k < 6; ++k)
    if (k != 2) feed(ex, c[k], 2, 10.0 + k);
  EXPECT_TRUE(ex.roundDone(12));
  EXPECT_EQ(ex.finishRound(12, true).after, c[0]);
}

// 2 H200 NVLink, 2 MiB: when stage 1 crowns a lucky Tree/SIMPLE, a duel of Tree/SIMPLE, Tree/LL and NCCL's
// Ring/SIMPLE keeps Ring/SIMPLE (28 us a call) unless Ring/LL (17.5 us kernel, 22.4 a call), measured in stage 1,
// joins it: the same-algorithm kernel rule only looks among the duel's arms.
TEST(Explorer, DuelTakesAlongTheArmOfNcclsAlgorithmWithAClearlyShorterKernel) {
  auto c = sixCandidates();  // c[0..2] Tree LL/LL128/SIMPLE, c[3..5] Ring LL/LL128/SIMPLE
  auto feedK = [](BucketExplorer& ex, const Decision& d, int n, double us, double kernelUs) {
    for (int i = 0; i < n; ++i) ex.addSample(Sample{d.algo, d.proto, 8, us, kernelUs});
  };
  for (bool withShorterKernel : {true, false}) {
    BucketExplorer ex;
    ex.beginStage1(c, 0, params(2, 0), true, 1, /*ncclPick=*/5);
    ex.extendPlan(100);
    // Stage-1 periods/kernels as measured (period of the best 31.6 us, fastest kernel 16.0: not host-bound).
    const double period[6] = {33.6, 39.4, 31.6, 42.3, 43.5, 58.2};
    const double kernel[6] = {17.0, 22.7, 16.0, withShorterKernel ? 17.5 : 21.0, withShorterKernel ? 18.9 : 21.0, 23.2};
    for (int k = 0; k < 6; ++k) feedK(ex, c[k], 3, period[k], kernel[k]);
    ASSERT_EQ(ex.finishRound(12, true).after, c[2]);
    ASSERT_TRUE(ex.beginNext(12));
    ASSERT_EQ(ex.stage(), BucketExplorer::kDuel);
    ex.extendPlan(100);
    if (!withShorterKernel) {
      // No Ring kernel 15% shorter than Ring/SIMPLE's: nothing comes along.
      EXPECT_EQ(ex.planEnd(), 12u + 12u);
      continue;
    }
    ASSERT_EQ(ex.planEnd(), 12u + 16u) << "Tree/LL, NCCL's Ring/SIMPLE, Ring/LL, the winner: 4 calls each";
    EXPECT_EQ(ex.decisionFor(12), c[0]);
    EXPECT_EQ(ex.decisionFor(16), c[5]);
    EXPECT_EQ(ex.decisionFor(20), c[3]);
    EXPECT_EQ(ex.decisionFor(24), c[2]);
    // Back to back Ring/SIMPLE is the fastest by period, Ring/LL within NCCL's 3% margin of it, with a kernel
    // 26% shorter: the kernel rule takes Ring/LL.
    feedK(ex, c[0], 4, 36.0, 17.0);
    feedK(ex, c[5], 4, 31.6, 23.5);
    feedK(ex, c[3], 4, 32.0, 17.4);
    feedK(ex, c[2], 4, 34.1, 16.0);
    ASSERT_TRUE(ex.roundDone(28));
    CommitInfo ci = ex.finishRound(28, true);
    EXPECT_EQ(ci.stage, BucketExplorer::kDuel);
    EXPECT_EQ(ci.after, c[3]) << ci.detail;
  }
}

namespace {
// As commitStage1OnC4, with quiet duels of `quiet` calls (spans over `span`; 0: all but the first).
void commitStage1OnC4Quiet(BucketExplorer& ex, const std::vector<Decision>& c, int spc, double winUs,
                           double othersUs, int ncclPick, int quiet = 8, int span = 0) {
  ExploreParams p = params(1, 0);
  p.quietDuelCalls = quiet;
  p.quietSpanCalls = span;
  p.quietDuelRatio = 1.15;  // the best other arm only (QuietDuelsTakeTheRunnerUpToo covers the wider ratio)
  ex.beginStage1(c, 0, p, true, spc, ncclPick);
  ex.extendPlan(100);
  // c[0] at othersUs, the rest 1.3x that: c[0] is the one other arm close enough to duel.
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 2 * spc, k == 4 ? winUs : k == 0 ? othersUs : 1.3 * othersUs);
  ex.finishRound(6, true);
}
Sample span(const Decision& d, double us, int calls, double kernelUs = 0) {
  return Sample{d.algo, d.proto, 4, us, kernelUs, calls};
}
}  // namespace

// Net path, 128 KiB on 2 H200: timed, Tree/Simple (c[4]) costs 114-127 us a period, untimed 82-91; NCCL's Ring/LL
// (c[3]) barely moves. A quiet duel times only each block's first and last call and ranks the spans between.
TEST(Explorer, QuietDuelTimesOnlyTheEndsOfEachBlockAndRanksSpans) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4Quiet(ex, c, 2, 100.0, 110.0, /*ncclPick=*/3);
  ASSERT_EQ(ex.current(), c[4]);
  ASSERT_TRUE(ex.beginDuel(6));
  ASSERT_TRUE(ex.quietDuel());
  ex.extendPlan(100);
  // Challengers: the best other arm (c[0], first of the tied) and NCCL's c[3]; the winner's block last.
  ASSERT_EQ(ex.planEnd(), 6u + 24u);
  EXPECT_EQ(ex.decisionFor(6), c[0]);
  EXPECT_EQ(ex.decisionFor(14), c[3]);
  EXPECT_EQ(ex.decisionFor(22), c[4]);
  for (uint64_t i = 0; i < 24; ++i)
    EXPECT_EQ(ex.measures(6 + i), i % 8 == 0 || i % 8 == 7) << "offset " << i;
  EXPECT_TRUE(ex.measures(5)) << "before the duel";
  EXPECT_TRUE(ex.measures(30)) << "after the blocks the winner runs timed";
  // Every timed call's own period says c[4] is slow (the profiler's toll); its spans say otherwise.
  for (int k : {0, 3, 4}) feed(ex, c[k], 4, k == 4 ? 120.0 : k == 3 ? 126.0 : 130.0);
  EXPECT_FALSE(ex.addSample(span(c[4], 90.0, 6), 30)) << "a span of another length is not this duel's";
  EXPECT_FALSE(ex.addSample(span(c[4], 90.0, 7), 29)) << "before the block's last call was issued";
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(ex.addSample(span(c[0], 131.0 + r, 7, 30.0), 30));
    EXPECT_TRUE(ex.addSample(span(c[3], 125.0 + r, 7, 110.0), 30));
    EXPECT_FALSE(ex.roundDone(30)) << "the winner's spans are still missing";
    EXPECT_TRUE(ex.addSample(span(c[4], 90.0 + r, 7, 19.0), 30));
  }
  ASSERT_TRUE(ex.roundDone(30));
  CommitInfo ci = ex.finishRound(30, true);
  EXPECT_EQ(ci.after, c[4]);
  EXPECT_NEAR(ci.afterUs, 90.0, 1e-3) << "the least of the block's spans (one per local rank)";
  EXPECT_NE(ci.detail.find("(2 spans)"), std::string::npos) << ci.detail;
  EXPECT_TRUE(ex.measures(31)) << "settled: no quiet requests";
  EXPECT_FALSE(ex.beginNext(30)) << "no channel stage: its timed calls would favour fewer channels";
}

TEST(Explorer, QuietDuelWithoutASpanForEveryArmKeepsItsBase) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4Quiet(ex, c, 1, 100.0, 104.0, /*ncclPick=*/3);
  ASSERT_EQ(ex.current(), c[4]);
  ASSERT_TRUE(ex.beginDuel(6));
  ex.extendPlan(100);
  uint64_t end = ex.planEnd();
  // Something else kept every call timed: per-call periods only, which a quiet duel does not rank on.
  for (int k : {0, 3}) feed(ex, c[k], 8, 80.0);
  feed(ex, c[4], 8, 120.0);
  ex.addSample(span(c[0], 80.0, 7), end);
  EXPECT_FALSE(ex.roundDone(end + 20)) << "after the grace calls: still not every arm's span";
  ASSERT_TRUE(ex.roundDone(end + 64));
  CommitInfo ci = ex.finishRound(end + 64, true);
  EXPECT_TRUE(ci.notEnough);
  EXPECT_EQ(ci.after, c[4]);
}

TEST(Explorer, QuietSpansCoverTheLatestCallsWhereAsked) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4Quiet(ex, c, 1, 100.0, 101.0, /*ncclPick=*/4, 8, /*span=*/4);
  ASSERT_TRUE(ex.beginDuel(6));
  ex.extendPlan(100);
  ASSERT_EQ(ex.planEnd(), 6u + 16u);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(ex.measures(6 + i), i % 8 == 3 || i % 8 == 7) << "offset " << i;
  EXPECT_FALSE(ex.addSample(span(c[0], 90.0, 7), 22)) << "spans cover 4 calls here";
  EXPECT_TRUE(ex.addSample(span(c[0], 90.0, 4), 22));
  EXPECT_TRUE(ex.addSample(span(c[4], 100.0, 4), 22));
  ASSERT_TRUE(ex.roundDone(22));
  EXPECT_EQ(ex.finishRound(22, true).after, c[0]) << "NCCL's c[4] beaten by over 3%";
}

TEST(Explorer, SpansOnlyRankQuietDuels) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, params(1, 0), true, 1);
  ex.extendPlan(100);
  EXPECT_FALSE(ex.addSample(span(c[0], 10.0, 7), 100)) << "stage 1 ranks per-call periods";
  commitStage1OnC4(ex, c, 1, 1, 10.0, 10.5);
  ASSERT_TRUE(ex.beginDuel(6));
  EXPECT_FALSE(ex.quietDuel()) << "quietDuelCalls 0: every call timed";
  for (uint64_t i = 6; i < 20; ++i) EXPECT_TRUE(ex.measures(i));
  EXPECT_FALSE(ex.addSample(span(c[0], 10.0, 3), 100));
}

// Stage 1 timed every call, and the profiler's toll differs between arms: quiet duels take the runner-up too when
// it came within quietDuelRatio (1.35) of the winner.
TEST(Explorer, QuietDuelsTakeTheRunnerUpToo) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ExploreParams p = params(1, 0);
  p.quietDuelCalls = 12;
  p.quietSpanCalls = 8;
  ex.beginStage1(c, 0, p, true, 1, /*ncclPick=*/3);
  ex.extendPlan(100);
  const double screen[6] = {131, 190, 160, 190, 107, 152};  // c[4] wins; c[0] 1.22x, c[5] 1.42x, NCCL's c[3]
  for (int k = 0; k < 6; ++k) feed(ex, c[k], 2, screen[k]);
  ASSERT_EQ(ex.finishRound(6, true).after, c[4]);
  ASSERT_TRUE(ex.beginDuel(6));
  ex.extendPlan(200);
  ASSERT_EQ(ex.planEnd(), 6u + 3 * 12u) << "c[0] (within 1.35x), NCCL's c[3], the winner c[4]";
  EXPECT_EQ(ex.decisionFor(6), c[0]);
  EXPECT_EQ(ex.decisionFor(18), c[3]);
  EXPECT_EQ(ex.decisionFor(30), c[4]);
  for (uint64_t i = 0; i < 36; ++i) EXPECT_EQ(ex.measures(6 + i), i % 12 == 3 || i % 12 == 11) << "offset " << i;
}

// Other sizes' calls fell inside a quiet block's span: that arm runs another block after the plan (or after the
// calls ranks were already given), and its span from there decides.
TEST(Explorer, InterruptedQuietBlocksRunAgain) {
  BucketExplorer ex;
  auto c = sixCandidates();
  commitStage1OnC4Quiet(ex, c, 1, 100.0, 104.0, /*ncclPick=*/3);
  ASSERT_TRUE(ex.beginDuel(6));
  ex.extendPlan(8);
  ASSERT_EQ(ex.decisionFor(6), c[0]);
  EXPECT_FALSE(ex.noteInterrupted(6, 8)) << "before the block's span: nothing lost";
  EXPECT_TRUE(ex.noteInterrupted(9, 12)) << "inside the span of c[0]'s block";
  EXPECT_FALSE(ex.noteInterrupted(10, 12)) << "once per block";
  ex.extendPlan(100);
  ASSERT_EQ(ex.planEnd(), 6u + 32u) << "c[0], c[3], c[4], then c[0] again";
  for (uint64_t i = 30; i < 38; ++i) EXPECT_EQ(ex.decisionFor(i), c[0]) << i;
  EXPECT_FALSE(ex.measures(31));
  EXPECT_TRUE(ex.measures(37));
  // The winner's block is cut after the plan ended and ranks were given calls up to 45: padding, then the re-run.
  ex.addSample(span(c[0], 130.0, 7), 38);
  ex.addSample(span(c[3], 120.0, 7), 38);
  EXPECT_TRUE(ex.noteInterrupted(27, 45));
  ex.extendPlan(100);
  EXPECT_EQ(ex.planEnd(), 6u + 48u) << "a winner block to cover calls 38-45, then the winner's re-run";
  for (uint64_t i = 38; i < 54; ++i) EXPECT_EQ(ex.decisionFor(i), c[4]) << i;
  ex.addSample(span(c[4], 90.0, 7), 54);
  ASSERT_TRUE(ex.roundDone(54));
  EXPECT_EQ(ex.finishRound(54, true).after, c[4]);
}
