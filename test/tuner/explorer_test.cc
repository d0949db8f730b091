#include <gtest/gtest.h>

#include <vector>

#include "tuner/explorer.h"

using namespace icn::tuner;

namespace {
std::vector<Decision> sixCandidates() {
  std::vector<Decision> v;
  for (int8_t a = 0; a < 2; ++a)
    for (int8_t p = 0; p < 3; ++p) v.push_back(Decision{a, p, 0});
  return v;
}
}  // namespace

TEST(Explorer, ScheduleIsAPureFunctionOfTheIndex) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, 4);
  for (uint64_t i = 0; i < 24; ++i) EXPECT_EQ(ex.decisionFor(i), c[i / 4]) << i;
  EXPECT_FALSE(ex.decisionFor(24).valid());  // after the schedule: base (NCCL's default) until a commit
  EXPECT_EQ(ex.scheduleEnd(), 24u);
  // Samples do not change what an index means.
  ex.addSample(Sample{1, 1, 8, 3.0});
  for (uint64_t i = 0; i < 24; ++i) EXPECT_EQ(ex.decisionFor(i), c[i / 4]);
}

TEST(Explorer, CommitsToFastestMedianAndKeepsHistoryForLaggingRanks) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, 4);
  ExploreParams p;
  const double times[6] = {20, 18, 30, 15, 9, 12};  // RING/LL128 fastest
  for (int k = 0; k < 6; ++k)
    for (int s = 0; s < 3; ++s) {
      EXPECT_FALSE(ex.roundDone(24, p));
      ex.addSample(Sample{c[k].algo, c[k].proto, 8, times[k] + (s == 1 ? 40.0 : 0.1 * s)});  // one outlier each
    }
  EXPECT_TRUE(ex.roundDone(24, p));
  CommitInfo ci = ex.finishRound(/*effectiveFrom=*/30, /*mayCommit=*/true);
  EXPECT_EQ(ci.after, (Decision{1, 1, 0}));
  EXPECT_FALSE(ci.before.valid());
  EXPECT_NE(ci.detail.find("RING/LL128"), std::string::npos);
  EXPECT_EQ(ex.decisionFor(30), (Decision{1, 1, 0}));
  EXPECT_EQ(ex.decisionFor(5), c[1]);         // a lagging rank still follows the schedule
  EXPECT_FALSE(ex.decisionFor(27).valid());   // and the gap keeps the base
}

TEST(Explorer, TimeoutCommitsWithWhatWasMeasured) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, 2);
  ExploreParams p;
  p.timeoutCalls = 10;
  ex.addSample(Sample{0, 2, 4, 50});
  ex.addSample(Sample{1, 2, 4, 40});
  EXPECT_FALSE(ex.roundDone(12 + 9, p));
  EXPECT_TRUE(ex.roundDone(12 + 10, p));
  EXPECT_EQ(ex.finishRound(22, true).after, (Decision{1, 2, 0}));
}

TEST(Explorer, NoCommitRemembersTheWinnerOnly) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, 1);
  for (int k = 0; k < 6; ++k) ex.addSample(Sample{c[k].algo, c[k].proto, 8, 10.0 + k});
  CommitInfo ci = ex.finishRound(6, /*mayCommit=*/false);
  EXPECT_FALSE(ci.after.valid());
  EXPECT_FALSE(ex.decisionFor(100).valid());
  EXPECT_EQ(ex.learned(), c[0]);
  EXPECT_EQ(ex.learnedUs(), 10.0);
}

TEST(Explorer, ChannelStageAttributesByObservedChannels) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, 1);
  ExploreParams p;
  p.minSamples = 1;
  for (int k = 0; k < 6; ++k) ex.addSample(Sample{c[k].algo, c[k].proto, 8, k == 4 ? 10.0 : 20.0});
  ex.finishRound(6, true);
  ASSERT_TRUE(ex.beginStage2(6, 2));
  EXPECT_EQ(ex.decisionFor(6), (Decision{1, 1, 4}));
  EXPECT_EQ(ex.decisionFor(8), (Decision{1, 1, 16}));
  EXPECT_EQ(ex.decisionFor(5), (Decision{1, 1, 0}));
  ex.addSample(Sample{1, 1, 3, 7.0});   // asked for 4, ran on 3: still "fewer"
  ex.addSample(Sample{1, 1, 16, 12.0});
  ex.addSample(Sample{0, 0, 4, 1.0});   // another pair: not part of this round
  EXPECT_TRUE(ex.roundDone(10, p));
  CommitInfo ci = ex.finishRound(10, true);
  EXPECT_EQ(ci.after, (Decision{1, 1, 4}));
  EXPECT_EQ(ci.stage, 2);
}

TEST(Explorer, ChannelStageNeedsAClearWin) {
  BucketExplorer ex;
  auto c = sixCandidates();
  ex.beginStage1(c, 0, 1);
  for (int k = 0; k < 6; ++k) ex.addSample(Sample{c[k].algo, c[k].proto, 8, k == 4 ? 10.0 : 20.0});
  ex.finishRound(6, true);
  ASSERT_TRUE(ex.beginStage2(6, 1));
  ex.addSample(Sample{1, 1, 4, 9.5});  // 5% better: within noise
  ex.addSample(Sample{1, 1, 16, 11.0});
  EXPECT_EQ(ex.finishRound(8, true).after, (Decision{1, 1, 0}));
}

TEST(Explorer, DriftNeedsSustainedSlowdown) {
  BucketExplorer ex;
  ex.settle(Decision{1, 1, 0}, 0, 10.0);
  ExploreParams p;
  p.driftWindow = 8;
  p.driftWindows = 2;
  // Noise and single spikes: no drift.
  for (int i = 0; i < 64; ++i) {
    ex.addSample(Sample{1, 1, 8, i % 7 == 0 ? 40.0 : 10.0 + (i % 3) * 0.5});
    EXPECT_FALSE(ex.driftDetected(p)) << i;
  }
  // Samples of other candidates are not evidence.
  for (int i = 0; i < 32; ++i) {
    ex.addSample(Sample{0, 0, 8, 100.0});
    EXPECT_FALSE(ex.driftDetected(p));
  }
  // Sustained 2x slowdown: detected after two windows.
  int detectedAt = -1;
  for (int i = 0; i < 32 && detectedAt < 0; ++i) {
    ex.addSample(Sample{1, 1, 8, 20.0});
    if (ex.driftDetected(p)) detectedAt = i;
  }
  EXPECT_EQ(detectedAt, 15);
}

TEST(Explorer, DriftIsBounded) {
  BucketExplorer ex;
  ex.settle(Decision{1, 1, 0}, 0, 10.0);
  ExploreParams p;
  p.driftWindow = 2;
  p.driftWindows = 1;
  p.maxReexplores = 2;
  int detections = 0;
  for (int i = 0; i < 100; ++i) {
    ex.addSample(Sample{1, 1, 0, 50.0});
    if (ex.driftDetected(p)) {
      ++detections;
      ex.noteReexplore();
    }
  }
  EXPECT_EQ(detections, 2);
}
