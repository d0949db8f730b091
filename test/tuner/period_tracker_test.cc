#include <gtest/gtest.h>

#include "telemetry/period_tracker.h"

using icn::telemetry::CollTiming;
using icn::telemetry::PeriodSample;
using icn::telemetry::PeriodTracker;

namespace {
CollTiming call(uint64_t seq, uint64_t stopUs, uint32_t epoch = 1, int algo = 0) {
  CollTiming t;
  t.coll = 0;
  t.algo = algo;
  t.proto = 2;
  t.seq = seq;
  t.stopNs = stopUs * 1000;
  t.epoch = epoch;
  return t;
}
}  // namespace

TEST(PeriodTracker, InOrderCompletionsGiveOnePeriodEach) {
  PeriodTracker p;
  std::array<PeriodSample, 2> out;
  EXPECT_EQ(p.complete(call(0, 100), out), 0) << "no timed predecessor";
  ASSERT_EQ(p.complete(call(1, 250), out), 1);
  EXPECT_EQ(out[0].timing.seq, 1u);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 150.0);
  ASSERT_EQ(p.complete(call(2, 260), out), 1);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 10.0);
}

// The proxy may see a call's last channel stop before its predecessor's: both periods still come, once each.
TEST(PeriodTracker, ASuccessorSeenFirstWaitsForItsPredecessor) {
  PeriodTracker p;
  std::array<PeriodSample, 2> out;
  p.complete(call(0, 100, 1, 1), out);
  EXPECT_EQ(p.complete(call(2, 700, 1, 0), out), 0);
  ASSERT_EQ(p.complete(call(1, 400, 1, 0), out), 2);
  EXPECT_EQ(out[0].timing.seq, 1u);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 300.0);
  EXPECT_EQ(out[1].timing.seq, 2u);
  EXPECT_DOUBLE_EQ(out[1].periodUs, 300.0);
  EXPECT_EQ(out[1].timing.algo, 0) << "the successor's own timing goes with its period";
  EXPECT_EQ(p.complete(call(1, 400), out), 0) << "a duplicate completion gives nothing";
  ASSERT_EQ(p.complete(call(3, 710), out), 1);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 10.0);
  EXPECT_EQ(p.periods(), 3u);
  EXPECT_EQ(p.reordered(), 1u);
}

TEST(PeriodTracker, NoPeriodAcrossAnUntimedGap) {
  PeriodTracker p;
  std::array<PeriodSample, 2> out;
  p.complete(call(0, 100, 1), out);
  EXPECT_EQ(p.complete(call(1, 900, 2), out), 0) << "the profiler was off in between (new epoch)";
  EXPECT_EQ(p.complete(call(3, 950, 2), out), 0) << "predecessor 2 was never timed";
  EXPECT_EQ(p.complete(call(4, 940, 2), out), 0) << "an end before the predecessor's is no period";
  // A slot reused 16 calls later is not mistaken for the predecessor.
  EXPECT_EQ(p.complete(call(3 + PeriodTracker::kWindow + 1, 2000, 2), out), 0);
}
