// The agreement's combination of every process's measurements (a collective is as slow as its slowest rank), and
// the validation of a follower's report as it arrives over the wire.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tuner/agree_wire.h"
#include "tuner/agreement.h"

namespace icn::tuner {
namespace {

Decision dec(int a, int p) { return Decision{static_cast<int8_t>(a), static_cast<int8_t>(p), 0}; }
ArmEstimate arm(int a, int p, float us, uint16_t n = 4) { return ArmEstimate{dec(a, p), us, n}; }

// A leader of a 3-rank communicator (one rank here, two follower processes) that sent START.
std::unique_ptr<Agreement> startedLeader() {
  auto a = std::make_unique<Agreement>(0x1234, 3, Agreement::Role::Leader, AgreeParams{});
  EXPECT_EQ(a->gate(0, 1), Agreement::Gate::Untuned);
  a->onMembers(2, 2);
  uint64_t s = 0, h = 0;
  std::vector<AgreedDecision> ds;
  EXPECT_TRUE(a->takeStart(&s, &h, &ds));
  a->sentStart(s, h, ds);
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
  EXPECT_TRUE(a->onReport(c, b, f1));
  EXPECT_TRUE(a->winners().empty()) << "decided before every process reported";
  EXPECT_TRUE(a->onReport(c, b, f2));
  auto w = a->winners();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].d, dec(1, 1));
  EXPECT_FLOAT_EQ(w[0].us, 60);
  EXPECT_EQ(w[0].processes, 3);
  // A report beyond the processes counted at START changes nothing.
  EXPECT_TRUE(a->onReport(c, b, std::vector<ArmEstimate>{arm(0, 2, 1)}));
  EXPECT_EQ(a->winners().size(), 1u);
}

TEST(Agreement, ArmsNotMeasuredEverywhereOrWithinTheMarginKeepNcclChoice) {
  auto a = startedLeader();
  // Tree/Simple is far faster where measured, but one process has too few samples of it: not compared.
  a->report(4, 10, std::vector<ArmEstimate>{arm(1, 2, 50), arm(0, 2, 10)}, dec(1, 2));
  EXPECT_TRUE(a->onReport(4, 10, std::vector<ArmEstimate>{arm(1, 2, 50), arm(0, 2, 10, 1)}));
  EXPECT_TRUE(a->onReport(4, 10, std::vector<ArmEstimate>{arm(1, 2, 50), arm(0, 2, 10)}));
  // Ring/LL128 beats NCCL's choice by 1% in its slowest process: inside the 3% margin.
  a->report(4, 11, std::vector<ArmEstimate>{arm(1, 2, 100), arm(1, 1, 99)}, dec(1, 2));
  EXPECT_TRUE(a->onReport(4, 11, std::vector<ArmEstimate>{arm(1, 2, 100), arm(1, 1, 99)}));
  EXPECT_TRUE(a->onReport(4, 11, std::vector<ArmEstimate>{arm(1, 2, 100), arm(1, 1, 99)}));
  auto w = a->winners();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].d, dec(1, 2));
  EXPECT_EQ(w[1].d, dec(1, 2));
  uint64_t h = 0;
  std::vector<AgreedDecision> ds;
  a->gate(a->start() + 600, 1);  // far enough for a horizon to be due
  ASSERT_TRUE(a->takeHorizon(&h, &ds));
  EXPECT_TRUE(ds.empty()) << "NCCL's choice needs no announcement";
}

TEST(Agreement, ReportsBeforeStartOrOutOfRangeAreProtocolErrors) {
  Agreement a(0x1, 3, Agreement::Role::Leader, AgreeParams{});
  EXPECT_FALSE(a.onReport(4, 10, std::vector<ArmEstimate>{arm(1, 2, 5)})) << "before START";
  auto s = startedLeader();
  EXPECT_FALSE(s->onReport(5, 10, std::vector<ArmEstimate>{}));
  EXPECT_FALSE(s->onReport(4, coll::kNumBuckets, std::vector<ArmEstimate>{}));
  std::vector<ArmEstimate> many(BucketExplorer::kMaxArms + 1, arm(1, 2, 5));
  EXPECT_FALSE(s->onReport(4, 10, many));
  Agreement f(0x1, 3, Agreement::Role::Follower, AgreeParams{});
  EXPECT_FALSE(f.onReport(4, 10, std::vector<ArmEstimate>{})) << "only the leader takes reports";
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
