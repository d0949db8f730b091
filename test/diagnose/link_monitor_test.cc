// The per-connection lateness measures: what counts as a wait, what as an arrival, the windows a reporter reads,
// the messages' pace, and the bounds (slots, stale operation ids).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "diagnose/histogram.h"
#include "diagnose/link_monitor.h"
#include "diagnose/summary.h"

using namespace icn::diagnose;

namespace {

constexpr uint64_t kUs = 1000, kMs = 1000 * kUs;

LinkInfo recvInfo() { return LinkInfo{0x1, 0, 1, "h0", "10.0.0.1", "h1", "10.0.0.2:5000", Dir::Recv}; }

}  // namespace

TEST(LinkMonitor, ReceiveWaitsFromPostToFirstByte) {
  LinkMonitor m(recvInfo());
  const OpId op = m.onRecvPosted(7, 1 << 20, 10 * kMs);
  m.onFirstByte(op, 14 * kMs);
  m.onRecvDone(op, 1 << 20, 15 * kMs);
  const WindowFigures f = figures(m.takeWindow());
  EXPECT_EQ(f.count, 1u);
  EXPECT_NEAR(f.waitMedianS, 0.004, 0.004 * 0.125);
  EXPECT_NEAR(f.waitMeanS, 0.004, 1e-9);
  EXPECT_EQ(f.arrivals, 1u);  // posted on an idle connection
  EXPECT_NEAR(f.arrivalMedianS, 0.004, 0.004 * 0.125);
}

TEST(LinkMonitor, DataThereBeforeThePostIsNoWait) {
  LinkMonitor m(recvInfo());
  const OpId op = m.posted(1, 100, 10 * kMs);
  m.ready(op, 9 * kMs);  // an early message, already waiting in the socket
  m.done(op, 100, 10 * kMs + 5 * kUs);
  const WindowFigures f = figures(m.takeWindow());
  EXPECT_EQ(f.count, 1u);
  EXPECT_EQ(f.waitMedianS, 0);
  EXPECT_EQ(f.waitMeanS, 0);
}

// Receives posted ahead wait for the one before them, not for the peer: the clock of each starts when the
// previous one completes, and a first byte that comes while an older receive is pending counts no wait.
TEST(LinkMonitor, HeadOfLineWaitStartsWhenThePreviousOperationCompletes) {
  LinkMonitor m(recvInfo());
  const OpId a = m.posted(1, 1000, 0);
  const OpId b = m.posted(2, 1000, 0);
  const OpId c = m.posted(3, 1000, 0);
  m.ready(a, 1 * kMs);
  m.ready(b, 1 * kMs + 100 * kUs);  // behind a, which is still pending: 0
  m.done(a, 1000, 2 * kMs);
  m.done(b, 1000, 2 * kMs + 10 * kUs);
  m.ready(c, 5 * kMs);  // head of line since b completed at 2.01 ms: waits 2.99 ms
  m.done(c, 1000, 5 * kMs + 10 * kUs);
  const WaitHistogram::Counts w = m.totals().wait;
  EXPECT_EQ(w.total, 3u);
  EXPECT_EQ(w.sumNs, 1 * kMs + 0 + (5 * kMs - (2 * kMs + 10 * kUs)));
  EXPECT_EQ(m.totals().arrival.total, 1u);  // only a was posted on an idle connection
}

TEST(LinkMonitor, SendWaitsForTheClearToSend) {
  LinkMonitor m(LinkInfo{0x1, 1, 0, "h1", "", "h0", "", Dir::Send});
  const OpId op = m.onSendPosted(4, 4096, 100 * kUs);
  EXPECT_EQ(m.pending(), 1u);
  m.onClearToSend(op, 2100 * kUs);
  m.onSendDone(op, 4096, 2200 * kUs);
  EXPECT_EQ(m.pending(), 0u);
  EXPECT_EQ(m.totals().wait.sumNs, 2 * kMs);
  EXPECT_EQ(m.completed(), 1u);
}

TEST(LinkMonitor, WindowsAreTheDifferencesBetweenReads) {
  LinkMonitor m(recvInfo());
  for (int i = 0; i < 10; i++) {
    const uint64_t t = static_cast<uint64_t>(i) * 10 * kMs;
    const OpId op = m.posted(i, 100, t);
    m.ready(op, t + 1 * kMs);
    m.done(op, 100, t + 1 * kMs);
  }
  EXPECT_EQ(figures(m.takeWindow()).count, 10u);
  EXPECT_EQ(figures(m.takeWindow()).count, 0u);
  const OpId op = m.posted(99, 100, 200 * kMs);
  m.ready(op, 208 * kMs);
  m.done(op, 100, 208 * kMs);
  const WindowFigures f = figures(m.takeWindow());
  EXPECT_EQ(f.count, 1u);
  EXPECT_NEAR(f.waitMedianS, 0.008, 0.008 * 0.125);
}

// A period's rate is kPaceBytes over its messages' median pace: a few messages stretched at the end (a proxy that
// polled late) do not move it; too small messages give none. Its ratio compares it with the connection's history.
TEST(LinkMonitor, PeriodRateIsTheMessagesMedianPace) {
  auto m = std::make_shared<LinkMonitor>(recvInfo());
  uint64_t t = 0;
  auto transfer = [&](uint64_t bytes, uint64_t ns) {
    const OpId op = m->posted(0, bytes, t);
    m->ready(op, t);
    m->done(op, bytes, t + ns);
    t += ns + kMs;
  };
  const double fast = (1 << 20) * 1e3;  // 1 MiB per ms
  for (int i = 0; i < 20; i++) transfer(100, 1 * kMs);  // too small to time a rate
  std::vector<PeerSummary> s = summarize({m});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].fig.rateBps, 0) << "messages under kRateMinBytes time latency";
  for (int i = 0; i < 60; i++) transfer(1 << 20, 1 * kMs);
  for (int i = 0; i < 4; i++) transfer(1 << 20, 10 * kMs);
  s = summarize({m});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_NEAR(s[0].fig.rateBps, fast, 0.125 * fast) << "four stretched messages of 64 leave the median";
  EXPECT_NEAR(s[0].fig.rateRatio, 1.0, 1e-9);
  EXPECT_NEAR(s[0].fig.rateBytes, 1 << 20, 1);
  for (int i = 0; i < 40; i++) transfer(1 << 20, 4 * kMs);  // the link slows to a quarter
  s = summarize({m});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_NEAR(s[0].fig.rateBps, fast / 4, 0.125 * fast / 4);
  EXPECT_LT(s[0].fig.rateRatio, 0.35) << "against the connection's history";
  EXPECT_GT(s[0].fig.rateRatio, 0.2);
  for (int i = 0; i < 40; i++) transfer(1 << 16, kMs / 16);  // 64 KiB messages at the first pace
  s = summarize({m});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_NEAR(s[0].fig.rateBps, fast, 0.125 * fast) << "the pace is per kPaceBytes, whatever the size";
  EXPECT_NEAR(s[0].fig.rateBytes, 1 << 16, 1);
  for (int i = 0; i < static_cast<int>(LinkMonitor::kRateMinMessages) - 1; i++) transfer(1 << 20, 1 * kMs);
  s = summarize({m});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].fig.rateBps, 0) << "fewer than kRateMinMessages messages in the period";
}

TEST(LinkMonitor, StaleAndUnknownOperationIdsAreIgnored) {
  LinkMonitor m(recvInfo());
  const OpId op = m.posted(0, 100, 0);
  m.ready(op, kMs);
  m.done(op, 100, 2 * kMs);
  m.done(op, 100, 3 * kMs);   // repeated
  m.ready(op, 4 * kMs);       // after done
  m.ready(kNoOp, 5 * kMs);
  m.ready(0xdead00ff, 5 * kMs);  // slot index out of range
  EXPECT_EQ(m.completed(), 1u);
  EXPECT_EQ(m.totals().wait.total, 1u);
  const OpId again = m.posted(0, 100, 10 * kMs);  // same slot, next generation
  EXPECT_NE(again, op);
  m.done(op, 100, 11 * kMs);  // the old id does not complete the new operation
  EXPECT_EQ(m.pending(), 1u);
}

TEST(LinkMonitor, EverySlotBusyLeavesFurtherOperationsUntrackedUntilOneFrees) {
  LinkMonitor m(recvInfo());
  std::vector<OpId> ops;
  for (int i = 0; i < LinkMonitor::kSlots; i++) ops.push_back(m.posted(i, 1, 0));
  EXPECT_EQ(m.posted(99, 1, 0), kNoOp);
  EXPECT_EQ(m.untracked(), 1u);
  m.abandon(ops[5]);
  EXPECT_EQ(m.pending(), static_cast<uint32_t>(LinkMonitor::kSlots - 1));
  EXPECT_NE(m.posted(100, 1, 0), kNoOp);
  EXPECT_EQ(m.totals().wait.total, 0u);  // abandoned: no sample
}

TEST(LinkMonitor, PendingOperationsOldestFirstWithProgress) {
  LinkMonitor m(recvInfo());
  const OpId a = m.posted(1, 1000, 5 * kMs);
  const OpId b = m.posted(2, 2000, 3 * kMs);  // posted later, with an earlier time: sorted by time
  m.ready(a, 6 * kMs);
  m.progress(a, 400, 7 * kMs);
  m.progress(a, 300, 8 * kMs);  // never backwards
  std::vector<PendingOp> p = m.pendingOps();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].tag, 2);
  EXPECT_EQ(p[0].readyNs, 0u);
  EXPECT_EQ(p[1].tag, 1);
  EXPECT_EQ(p[1].bytesDone, 400u);
  EXPECT_EQ(p[1].progressNs, 7 * kMs);
  EXPECT_EQ(m.lastProgressNs(), 7 * kMs);
  EXPECT_EQ(m.lastPostNs(), 5 * kMs);
  m.done(b, 2000, 9 * kMs);
  EXPECT_EQ(m.pendingOps().size(), 1u);
}

// A reporter reads while the owner posts and completes: it never sees an operation that was not posted, and the
// window counts add up to the operations completed.
TEST(LinkMonitor, ReadersRunBesideTheOwner) {
  LinkMonitor m(recvInfo());
  std::atomic<bool> stop{false};
  uint64_t seen = 0;
  std::thread reader([&] {
    while (!stop.load()) {
      for (const PendingOp& p : m.pendingOps()) EXPECT_EQ(p.bytes, static_cast<uint64_t>(p.tag) * 10);
      seen += m.takeWindow().wait.total;
    }
  });
  for (int i = 0; i < 200000; i++) {
    const uint64_t t = static_cast<uint64_t>(i) * kUs;
    const OpId op = m.posted(i % 1000, static_cast<uint64_t>(i % 1000) * 10, t);
    m.ready(op, t + 1);
    m.done(op, 1, t + 2);
  }
  stop = true;
  reader.join();
  seen += m.takeWindow().wait.total;
  EXPECT_EQ(seen, 200000u);
}

TEST(WaitHistogram, BucketsAreLogSpacedFromAMicrosecond) {
  EXPECT_EQ(WaitHistogram::bucketOf(0), 0);
  EXPECT_EQ(WaitHistogram::bucketOf(999), 0);
  EXPECT_EQ(WaitHistogram::bucketOf(1000), 1);
  EXPECT_EQ(WaitHistogram::bucketOf(2000), 1 + WaitHistogram::kSub);
  EXPECT_EQ(WaitHistogram::bucketOf(uint64_t{1} << 62), WaitHistogram::kBuckets - 1);
  // From 16 us up every bucket is reachable (below, whole microseconds skip some) and 12.5% wide at most.
  for (int b = 1 + 4 * WaitHistogram::kSub; b < WaitHistogram::kBuckets - 1; b++) {
    const double lo = WaitHistogram::bucketLowS(b);
    EXPECT_EQ(WaitHistogram::bucketOf(static_cast<uint64_t>(std::ceil(lo * 1e9))), b) << b;
    EXPECT_EQ(WaitHistogram::bucketOf(static_cast<uint64_t>(std::ceil(lo * 1e9)) - 1000), b - 1) << b;
    EXPECT_LE(WaitHistogram::bucketHighS(b) / lo, 1.125 + 1e-12) << b;
  }
}

TEST(WaitHistogram, QuantilesLandWithinABucketOfTheExactOnes) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> dist(std::log(200e-6), 1.0);
  WaitHistogram h;
  std::vector<double> exact;
  for (int i = 0; i < 5000; i++) {
    const double s = dist(rng);
    exact.push_back(s);
    h.add(static_cast<uint64_t>(s * 1e9));
  }
  const WaitHistogram::Counts c = h.read();
  for (double q : {0.5, 0.9}) {
    std::vector<double> v = exact;
    const double want = quantile(v, q);
    EXPECT_NEAR(c.quantileS(q) / want, 1.0, 0.125) << q;
  }
  WaitHistogram::Counts empty;
  EXPECT_EQ(empty.quantileS(0.5), 0);
  EXPECT_EQ(empty.meanS(), 0);
}
