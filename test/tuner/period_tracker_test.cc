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

namespace {
// A timed call with NCCL's sequence number: the tuner timed only some of a run of identical calls.
CollTiming numbered(uint64_t seq, uint64_t ncclSeq, uint64_t stopUs, uint32_t epoch, int algo = 0) {
  CollTiming t = call(seq, stopUs, epoch, algo);
  t.bytes = 131072;
  t.channels = 4;
  t.ncclSeq = ncclSeq;
  return t;
}
}  // namespace

// Block of 8: timed first (NCCL seq 10) and last (17), six untimed between: one span of 7 calls, per call.
TEST(PeriodTracker, TimedEndsOfIdenticalCallsGiveASpan) {
  PeriodTracker p;
  std::array<PeriodSample, 2> out;
  EXPECT_EQ(p.complete(numbered(0, 10, 1000, 1), out), 0);
  ASSERT_EQ(p.complete(numbered(1, 17, 1630, 2), out), 1) << "the profiler was off between: a new epoch";
  EXPECT_EQ(out[0].calls, 7);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 90.0);
  EXPECT_EQ(out[0].timing.ncclSeq, 17u);
  EXPECT_EQ(p.spans(), 1u);
  // The next call, timed back to back with the last: a period of its own.
  ASSERT_EQ(p.complete(numbered(2, 18, 1720, 2), out), 1);
  EXPECT_EQ(out[0].calls, 1);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 90.0);
  EXPECT_EQ(p.periods(), 2u);
}

TEST(PeriodTracker, ASpanSeenBeforeItsFirstCallStillComes) {
  PeriodTracker p;
  std::array<PeriodSample, 2> out;
  p.complete(numbered(0, 3, 500, 1), out);
  EXPECT_EQ(p.complete(numbered(2, 12, 1400, 3), out), 0);
  ASSERT_EQ(p.complete(numbered(1, 5, 700, 2), out), 2);
  EXPECT_EQ(out[0].calls, 2);
  EXPECT_DOUBLE_EQ(out[0].periodUs, 100.0);
  EXPECT_EQ(out[1].calls, 7);
  EXPECT_DOUBLE_EQ(out[1].periodUs, 100.0);
  EXPECT_EQ(p.spans(), 2u);
  EXPECT_EQ(p.reordered(), 1u);
}

TEST(PeriodTracker, NoSpanAcrossAChangeOrTooLongAGap) {
  std::array<PeriodSample, 2> out;
  {
    PeriodTracker p;
    p.complete(numbered(0, 10, 1000, 1, 0), out);
    EXPECT_EQ(p.complete(numbered(1, 17, 1630, 2, 1), out), 0) << "another algorithm: the calls between are unknown";
  }
  {
    PeriodTracker p;
    CollTiming a = numbered(0, 10, 1000, 1), b = numbered(1, 17, 1630, 2);
    b.bytes *= 2;
    p.complete(a, out);
    EXPECT_EQ(p.complete(b, out), 0) << "another size";
  }
  {
    PeriodTracker p;
    CollTiming a = numbered(0, 10, 1000, 1), b = numbered(1, 17, 1630, 2);
    b.coll = 1;
    p.complete(a, out);
    EXPECT_EQ(p.complete(b, out), 0) << "another function: NCCL numbers each function apart, epochs differ";
  }
  {
    PeriodTracker p;
    p.complete(numbered(0, 10, 1000, 1), out);
    EXPECT_EQ(p.complete(numbered(1, 11 + PeriodTracker::kMaxSpan, 9000, 2), out), 0) << "too many calls between";
  }
  {
    PeriodTracker p;
    p.complete(numbered(0, 10, 1000, 1), out);
    EXPECT_EQ(p.complete(numbered(1, 11, 1090, 2), out), 0)
        << "adjacent numbers but the profiler went off and on: another function's call may lie between";
  }
  {
    PeriodTracker p;
    p.complete(numbered(0, 10, 1000, 1), out);
    EXPECT_EQ(p.complete(numbered(1, 10, 1090, 1), out), 0) << "no progress in NCCL's numbers";
  }
}
