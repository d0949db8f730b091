// The agreement's combination of every process's measurements (a collective is as slow as its slowest rank), and
// the validation of a follower's report as it arrives over the wire.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tuner/agree/agreement.h"
#include "tuner/agree/wire.h"

namespace icn::tuner {
namespace {

Decision dec(int a, int p) { return Decision{static_cast<int8_t>(a), static_cast<int8_t>(p), 0}; }
ArmEstimate arm(int a, int p, float us, uint16_t n = 4) { return ArmEstimate{dec(a, p), us, n}; }

// Followers 1 and 2 (ids in the leader's agreement) of startedLeader().
constexpr int kF1 = 1, kF2 = 2;

// A leader of a 3-rank communicator (rank 0 here, ranks 1 and 2 in two follower processes) that sent START.
std::unique_ptr<Agreement> startedLeader() {
  auto a = std::make_unique<Agreement>(0x1234, 3, Agreement::Role::Leader, AgreeParams{});
  a->noteRank(0);
  EXPECT_EQ(a->gate(0, 1), Agreement::Gate::Untuned);
  int id = 0;
  EXPECT_EQ(a->join("f1", &id), Agreement::Join::Member);
  EXPECT_EQ(id, kF1);
  EXPECT_EQ(a->join("f2", &id), Agreement::Join::Member);
  EXPECT_EQ(a->claimRanks(kF1, std::vector<int>{1}), "");
  EXPECT_EQ(a->claimRanks(kF2, std::vector<int>{2}), "");
  Agreement::Announcement m;
  EXPECT_TRUE(a->takeAnnouncement(&m));
  EXPECT_TRUE(m.start);
  a->delivered();
  return a;
}

TEST(Agreement, WinnerMinimisesTheSlowestProcessTime) {
  auto a = startedLeader();
  const int c = 4, b = 22;
  // The leader sees Tree/Simple fastest; the slowest follower sees Ring/LL128 fastest, and is slower everywhere.
  std::vector<ArmEstimate> leader = {arm(1, 2, 47), arm(1, 1, 40), arm(0, 2, 30)};
  std::vector<ArmEstimate> f1 = {arm(1, 2, 47), arm(1, 1, 40), arm(0, 2, 52)};
  std::vector<ArmEstimate> f2 = {arm(1, 2, 70), arm(1, 1, 60), arm(0, 2, 78)};
  a->report(c, b, leader, dec(1, 2));
  EXPECT_EQ(a->onReport(kF1, c, b, f1), "");
  EXPECT_TRUE(a->winners().empty()) << "decided before every process reported";
  EXPECT_EQ(a->onReport(kF2, c, b, f2), "");
  auto w = a->winners();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].d, dec(1, 1));
  EXPECT_FLOAT_EQ(w[0].us, 60);
  EXPECT_EQ(w[0].processes, 3);
  // A report beyond the processes counted at START changes nothing.
  EXPECT_EQ(a->onReport(kF1, c, b, std::vector<ArmEstimate>{arm(0, 2, 1)}), "");
  EXPECT_EQ(a->winners().size(), 1u);
}

TEST(Agreement, ArmsNotMeasuredEverywhereOrWithinTheMarginKeepNcclChoice) {
  auto a = startedLeader();
  // Tree/Simple is far faster where measured, but one process has too few samples of it: not compared.
  a->report(4, 10, std::vector<ArmEstimate>{arm(1, 2, 50), arm(0, 2, 10)}, dec(1, 2));
  EXPECT_EQ(a->onReport(kF1, 4, 10, std::vector<ArmEstimate>{arm(1, 2, 50), arm(0, 2, 10, 1)}), "");
  EXPECT_EQ(a->onReport(kF2, 4, 10, std::vector<ArmEstimate>{arm(1, 2, 50), arm(0, 2, 10)}), "");
  // Ring/LL128 beats NCCL's choice by 1% in its slowest process: inside the 3% margin.
  a->report(4, 11, std::vector<ArmEstimate>{arm(1, 2, 100), arm(1, 1, 99)}, dec(1, 2));
  EXPECT_EQ(a->onReport(kF1, 4, 11, std::vector<ArmEstimate>{arm(1, 2, 100), arm(1, 1, 99)}), "");
  EXPECT_EQ(a->onReport(kF2, 4, 11, std::vector<ArmEstimate>{arm(1, 2, 100), arm(1, 1, 99)}), "");
  auto w = a->winners();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].d, dec(1, 2));
  EXPECT_EQ(w[1].d, dec(1, 2));
  Agreement::Announcement m;
  a->gate(a->start() + 600, 1);  // far enough for a horizon to be due
  ASSERT_TRUE(a->takeAnnouncement(&m));
  EXPECT_FALSE(m.start);
  EXPECT_TRUE(m.decisions.empty()) << "NCCL's choice needs no announcement";
}

TEST(Agreement, ReportsBeforeStartOrOutOfRangeAreProtocolErrors) {
  Agreement a(0x1, 3, Agreement::Role::Leader, AgreeParams{});
  int id = 0;
  a.join("f", &id);
  a.claimRanks(id, std::vector<int>{1});
  EXPECT_NE(a.onReport(id, 4, 10, std::vector<ArmEstimate>{arm(1, 2, 5)}), "") << "before START";
  auto s = startedLeader();
  EXPECT_NE(s->onReport(kF1, 5, 10, std::vector<ArmEstimate>{}), "");
  EXPECT_NE(s->onReport(kF1, 4, coll::kNumBuckets, std::vector<ArmEstimate>{}), "");
  std::vector<ArmEstimate> many(BucketExplorer::kMaxArms + 1, arm(1, 2, 5));
  EXPECT_NE(s->onReport(kF1, 4, 10, many), "");
  EXPECT_NE(s->onReport(7, 4, 10, std::vector<ArmEstimate>{}), "") << "no such member";
  Agreement f(0x1, 3, Agreement::Role::Follower, AgreeParams{});
  EXPECT_NE(f.onReport(1, 4, 10, std::vector<ArmEstimate>{}), "") << "only the leader takes reports";
}

// A stop while a horizon is in flight (some follower's socket took it, another's did not yet) counts it as
// delivered: a follower holding it runs up to its horizon with the decisions of the horizon before, which take
// effect right after that one, so the leader stops past the horizon in flight and keeps them too.
TEST(Agreement, StopWithAnAnnouncementInFlightTakesItFirst) {
  auto a = startedLeader();
  a->propose(4, 22, dec(1, 1));
  a->gate(a->start() + 600, 1);
  Agreement::Announcement m;
  ASSERT_TRUE(a->takeAnnouncement(&m));
  ASSERT_EQ(m.decisions.size(), 1u);
  a->delivered();
  uint64_t h1 = m.h;  // the decision is in force from h1 + 1
  a->gate(h1 - 100, 1);
  ASSERT_TRUE(a->takeAnnouncement(&m));
  EXPECT_TRUE(a->inFlight());
  EXPECT_EQ(a->announcedHorizon(), m.h);
  EXPECT_EQ(a->stop("test"), m.h + 1) << "past the horizon in flight, which no rank can have passed";
  EXPECT_EQ(a->decisionAt(4, 22, h1 + 1), dec(1, 1)) << "what a follower holding the flight runs, the leader runs";
  EXPECT_FALSE(a->takeAnnouncement(&m)) << "nothing new once stopped";
}

// START in flight when the leader gives up waiting: a follower may hold it and run its plan from START's call, so
// the leader starts too and stops after START's horizon, instead of staying untuned.
TEST(Agreement, StartInFlightIsHonouredByTheStop) {
  Agreement a(0x1, 2, Agreement::Role::Leader, AgreeParams{});
  a.noteRank(0);
  a.gate(0, 1);
  int id = 0;
  a.join("f", &id);
  a.claimRanks(id, std::vector<int>{1});
  Agreement::Announcement m;
  ASSERT_TRUE(a.takeAnnouncement(&m));
  ASSERT_TRUE(m.start);
  EXPECT_EQ(a.stop("test"), m.h + 1);
  EXPECT_EQ(a.start(), m.s);
  EXPECT_EQ(a.gate(m.s, 1), Agreement::Gate::Tuned);
}

// A late follower gets every announcement in order: START, each horizon that carried decisions, the last horizon.
TEST(Agreement, HistoryReplaysEveryAnnouncement) {
  auto a = startedLeader();
  Agreement::Announcement m;
  a->propose(4, 22, dec(1, 1));
  a->gate(a->start() + 600, 1);
  ASSERT_TRUE(a->takeAnnouncement(&m));
  a->delivered();
  uint64_t withDecision = m.h;
  a->gate(m.h - 100, 1);
  ASSERT_TRUE(a->takeAnnouncement(&m));
  a->delivered();
  auto h = a->history();
  ASSERT_EQ(h.size(), 3u);
  EXPECT_TRUE(h[0].start);
  EXPECT_EQ(h[0].s, a->start());
  EXPECT_EQ(h[1].h, withDecision);
  EXPECT_EQ(h[1].decisions.size(), 1u);
  EXPECT_EQ(h[2].h, m.h);
  EXPECT_TRUE(h[2].decisions.empty());
  int id = 0;
  EXPECT_EQ(a->join("late", &id), Agreement::Join::Late) << "START is out: every rank was held before it came";
}

// Each rank once: the leader's own ranks are its own whatever a follower says, a rank claimed by two followers is
// a lie naming the first claimant, and a claim outside the communicator is a lie.
TEST(Agreement, EveryRankIsHeldOnce) {
  Agreement a(0x1, 4, Agreement::Role::Leader, AgreeParams{});
  a.noteRank(0);
  int f1 = 0, f2 = 0;
  a.join("f1", &f1);
  a.join("f2", &f2);
  EXPECT_NE(a.claimRanks(f1, std::vector<int>{0}).find("this process (the leader) holds"), std::string::npos);
  EXPECT_EQ(a.claimRanks(f1, std::vector<int>{1, 2}), "");
  EXPECT_NE(a.claimRanks(f1, std::vector<int>{3}).find("second time"), std::string::npos);
  EXPECT_NE(a.claimRanks(f2, std::vector<int>{2}).find("follower f1 claimed first"), std::string::npos);
  EXPECT_NE(a.claimRanks(f2, std::vector<int>{4}).find("rank 4 of a communicator of 4"), std::string::npos);
  int f3 = 0;
  EXPECT_EQ(a.join("f3", &f3), Agreement::Join::Member);
  EXPECT_EQ(a.join("f4", &f3), Agreement::Join::TooMany) << "4 ranks: 3 follower processes at most";
  // A follower that claimed a rank this process turns out to hold lied: the agreement stops before START.
  Agreement b(0x2, 3, Agreement::Role::Leader, AgreeParams{});
  b.noteRank(0);
  b.join("f", &f1);
  EXPECT_EQ(b.claimRanks(f1, std::vector<int>{1, 2}), "");
  b.noteRank(2);
  EXPECT_TRUE(b.frozen());
  EXPECT_EQ(b.frozenFrom(), 0u);
}

// On a FREEZE a follower keeps every decision it holds and takes no new one; the call number in the FREEZE is not
// trusted: an honest leader sends exactly that number, and no leader can void a decision this process may have used.
TEST(Agreement, FollowerStopsWhereItsStreamEnds) {
  Agreement f(0x1, 2, Agreement::Role::Follower, AgreeParams{});
  ASSERT_TRUE(f.onStart(1024, 2048, {AgreedDecision{4, 22, dec(1, 1)}}));
  EXPECT_FALSE(f.onFreeze(1, "test", false)) << "a FREEZE behind the stream is not the leader's stop";
  EXPECT_EQ(f.frozenFrom(), 2049u);
  EXPECT_EQ(f.decisionAt(4, 22, 1500), dec(1, 1));
  Agreement g(0x1, 2, Agreement::Role::Follower, AgreeParams{});
  ASSERT_TRUE(g.onStart(1024, 2048, {}));
  EXPECT_TRUE(g.onFreeze(2049, "test", false));
}

std::string encode(int c, int b, const std::vector<ArmEstimate>& arms) {
  agree::Writer w;
  agree::putReport(w, c, b, arms);
  return w.b;
}

bool decode(const std::string& s, std::vector<ArmEstimate>* arms) {
  agree::Reader r{reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  int c = 0, b = 0;
  return agree::getReport(r, &c, &b, arms);
}

TEST(AgreementWire, ReportRoundTripsAndMalformedReportsAreRefused) {
  std::vector<ArmEstimate> arms = {arm(1, 2, 47.5f, 6), arm(0, 1, 12.25f, 300)}, got;
  std::string ok = encode(4, 22, arms);
  ASSERT_TRUE(decode(ok, &got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].d, dec(0, 1));
  EXPECT_FLOAT_EQ(got[1].us, 12.25f);
  EXPECT_EQ(got[1].usable, 300);
  EXPECT_FALSE(decode(ok.substr(0, ok.size() - 1), &got)) << "truncated";
  EXPECT_FALSE(decode(ok + "x", &got)) << "trailing bytes";
  EXPECT_FALSE(decode(encode(5, 22, arms), &got)) << "collective out of range";
  EXPECT_FALSE(decode(encode(4, coll::kNumBuckets, arms), &got)) << "bucket out of range";
  EXPECT_FALSE(decode(encode(4, 22, {arm(7, 0, 1)}), &got)) << "algorithm out of range";
  EXPECT_FALSE(decode(encode(4, 22, {arm(1, 3, 1)}), &got)) << "protocol out of range";
  EXPECT_FALSE(decode(encode(4, 22, {arm(1, 2, 1), arm(1, 2, 2)}), &got)) << "an arm twice";
  EXPECT_FALSE(decode(encode(4, 22, {arm(1, 2, std::numeric_limits<float>::quiet_NaN())}), &got));
  EXPECT_FALSE(decode(encode(4, 22, {arm(1, 2, std::numeric_limits<float>::infinity())}), &got));
  EXPECT_FALSE(decode(encode(4, 22, {arm(1, 2, -1)}), &got));
  std::string tooMany = ok;
  tooMany[2] = static_cast<char>(BucketExplorer::kMaxArms + 1);
  EXPECT_FALSE(decode(tooMany, &got)) << "more arms than any plan has";
}

}  // namespace
}  // namespace icn::tuner
