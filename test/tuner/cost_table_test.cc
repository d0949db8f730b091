#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "nccl_pick.h"
#include "tuner/context.h"
#include "tuner/store/cost_table.h"

using namespace icn;
using namespace icn::tuner;

namespace {
constexpr float kGuard = 12345.f;

// A 7x3 table surrounded by guard cells, to prove nothing outside it is written.
struct Guarded {
  std::vector<float> mem = std::vector<float>(21 + 16, kGuard);
  float* t() { return mem.data() + 8; }
  void expectGuardsIntact() {
    for (int i = 0; i < 8; ++i) EXPECT_EQ(mem[i], kGuard);
    for (size_t i = 8 + 21; i < mem.size(); ++i) EXPECT_EQ(mem[i], kGuard);
  }
};
}  // namespace

TEST(CostTable, ForceSupportedMakesNcclPickIt) {
  Guarded g;
  realisticTable(g.t(), 1 << 20);
  CostTable ct(g.t(), 7, 3);
  EXPECT_TRUE(ct.supported(1, 1));
  EXPECT_FALSE(ct.supported(4, 0));
  EXPECT_FALSE(ct.supported(7, 0));
  EXPECT_FALSE(ct.supported(0, 3));
  ASSERT_TRUE(ct.force(Decision{0, 0, 0}));
  EXPECT_EQ(ncclPick(g.t()), std::make_pair(0, 0));
  g.expectGuardsIntact();
}

TEST(CostTable, NeverMakesUnsupportedSelectable) {
  Guarded g;
  realisticTable(g.t(), 4096);
  std::vector<float> before(g.t(), g.t() + 21);
  CostTable ct(g.t(), 7, 3);
  EXPECT_FALSE(ct.force(Decision{4, 2, 0}));  // NVLS: -1
  EXPECT_FALSE(ct.force(Decision{6, -1, 0}));  // PAT, any proto: all -1
  EXPECT_EQ(std::vector<float>(g.t(), g.t() + 21), before);
  g.expectGuardsIntact();
}

TEST(CostTable, WildcardsPickCheapestOfFixedDimension) {
  Guarded g;
  realisticTable(g.t(), 64);
  CostTable ct(g.t(), 7, 3);
  ASSERT_TRUE(ct.force(Decision{-1, 2, 0}));  // Simple on whichever algorithm is cheaper
  auto pick = ncclPick(g.t());
  EXPECT_EQ(pick.second, 2);
  Guarded h;
  realisticTable(h.t(), 64);
  CostTable ct2(h.t(), 7, 3);
  ASSERT_TRUE(ct2.force(Decision{0, -1, 0}));
  EXPECT_EQ(ncclPick(h.t()).first, 0);
}

TEST(CostTable, TieWithEarlierZeroIsBroken) {
  Guarded g;
  realisticTable(g.t(), 64);
  g.t()[0] = 0.f;  // Tree/LL already 0.0 (e.g. a one-rank comm)
  CostTable ct(g.t(), 7, 3);
  ASSERT_TRUE(ct.force(Decision{1, 2, 0}));
  EXPECT_EQ(ncclPick(g.t()), std::make_pair(1, 2));
}

TEST(CostTable, OnlyZerosAheadOfOursAreLifted) {
  // NCCL keeps the first minimum in algorithm-major order, so a 0.0 after ours cannot win: it is left alone (the
  // lift runs on every call and only looks at the cells ahead).
  Guarded g;
  realisticTable(g.t(), 64);
  g.t()[0 * 3 + 1] = 0.f;  // Tree/LL128, ahead of Ring/LL
  g.t()[1 * 3 + 2] = 0.f;  // Ring/SIMPLE, after it
  CostTable ct(g.t(), 7, 3);
  ASSERT_TRUE(ct.force(Decision{1, 0, 0}));
  EXPECT_EQ(ncclPick(g.t()), std::make_pair(1, 0));
  EXPECT_EQ(g.t()[0 * 3 + 1], 1.f);
  EXPECT_EQ(g.t()[1 * 3 + 2], 0.f);
}

TEST(CostTable, LiftStaysInsideOurColumnsOfAWiderTable) {
  // numProto 4: column 3 is not ours even when it holds a 0.0 ahead of our choice.
  std::vector<float> mem(8 * 4, 50.f);
  mem[0 * 4 + 3] = 0.f;
  mem[0 * 4 + 1] = 0.f;
  CostTable ct(mem.data(), 8, 4);
  ASSERT_TRUE(ct.force(Decision{1, 2, 0}));
  EXPECT_EQ(mem[1 * 4 + 2], 0.f);
  EXPECT_EQ(mem[0 * 4 + 1], 1.f);
  EXPECT_EQ(mem[0 * 4 + 3], 0.f);
}

TEST(CostTable, StrideFollowsNcclDimensions) {
  // A hypothetical wider table (numProto 4): we must index with NCCL's stride and leave column 3 alone.
  std::vector<float> mem(8 * 4, 50.f);
  for (int a = 0; a < 8; ++a) mem[a * 4 + 3] = kGuard;
  for (int p = 0; p < 4; ++p) mem[7 * 4 + p] = kGuard;
  CostTable ct(mem.data(), 8, 4);
  ASSERT_TRUE(ct.force(Decision{1, 2, 0}));
  EXPECT_EQ(mem[1 * 4 + 2], 0.f);
  for (int a = 0; a < 8; ++a) EXPECT_EQ(mem[a * 4 + 3], kGuard);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(mem[7 * 4 + p], kGuard);
}

TEST(CostTable, NullOrEmptyTableIsHarmless) {
  CostTable ct(nullptr, 7, 3);
  EXPECT_FALSE(ct.supported(0, 0));
  EXPECT_FALSE(ct.force(Decision{0, 0, 0}));
  EXPECT_EQ(ct.ncclChoice().algo, -1);
}

// Whole context, online, random tables with random -1 holes: whatever it explores, NCCL never ends up on a -1
// entry, and the guard cells stay intact.
TEST(CostTable, OnlineContextNeverSelectsUnsupported) {
  ContextConfig cfg;
  cfg.group.mode = Mode::Online;
  cfg.group.explore.callsPerArm = 1;
  cfg.group.explore.confirmCalls = 1;
  cfg.group.explore.graceCalls = 2;
  Context ctx(cfg, /*commId=*/0xC0575, /*nRanks=*/1, /*nNodes=*/1);
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    Guarded g;
    for (int k = 0; k < 21; ++k) g.t()[k] = (rng() % 3 == 0) ? -1.f : static_cast<float>(rng() % 1000) / 10.f;
    g.t()[(rng() % 2) * 3 + rng() % 3] = 5.f;  // at least one supported entry
    std::vector<float> orig(g.t(), g.t() + 21);
    int ch = 0;
    uint64_t bytes = uint64_t{1} << (rng() % 30);
    CostTable ct(g.t(), 7, 3);
    ctx.getCollInfo(coll::kAllReduce, bytes, 1, ct, 0, &ch);
    auto pick = ncclPick(g.t());
    ASSERT_GE(pick.first, 0);
    EXPECT_GE(orig[pick.first * 3 + pick.second], 0.f) << "picked an unsupported entry at call " << i;
    for (int k = 0; k < 21; ++k)
      if (orig[k] < 0) {
        EXPECT_EQ(g.t()[k], orig[k]) << "a -1 entry was modified";
      }
    EXPECT_GE(ch, 0);
    EXPECT_LE(ch, 64);
    g.expectGuardsIntact();
  }
}
