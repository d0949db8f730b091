// Group-level behaviour on synthetic noisy timing models: convergence, rank consistency, drift, distributed mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "group_sim.h"

using namespace group_sim;

TEST(Group, ConvergesToFastestOnNoisyModels) {
  Model small{{{13.8, 16.0, 25.0}, {15.5, 17.0, 24.0}}};
  small.skewUs = 6;  // bigger than the gaps between candidates: only a robust estimate survives it
  Model close{{{3.1, 2.9, 3.4}, {2.2, 2.1, 2.6}}};  // 5% between the two best
  close.skewUs = 4;
  const Model models[] = {
      small,
      {{{40.0, 30.0, 35.0}, {33.0, 23.8, 29.7}}},   // 2 MiB: Ring/LL128
      {{{900, 700, 650}, {800, 600, 520}}},          // large: Ring/Simple
      close,
  };
  const Decision expect[] = {{0, 0, 0}, {1, 1, 0}, {1, 2, 0}, {1, 1, 0}};
  const uint32_t seeds = testSeeds();
  for (int mi = 0; mi < 4; ++mi) {
    uint32_t exact = 0, missed = 0;
    for (uint32_t seed = 1; seed <= seeds; ++seed) {
      Sim sim(2, 2, onlineCfg(), seed * 31 + mi);
      int settledAt = -1;
      for (int i = 0; i < 120; ++i) {
        sim.step(models[mi], 1 << 21);
        if (sim.group->phase(coll::kAllReduce, 21) != BucketExplorer::Phase::Settled) settledAt = -1;
        else if (settledAt < 0) settledAt = i;
      }
      Decision d = sim.current(1 << 21);
      ASSERT_GE(d.algo, 0);
      ASSERT_GE(d.proto, 0);
      const Model& m = models[mi];
      double best = m.time(expect[mi].algo, expect[mi].proto, m.defaultChannels);
      double got = m.time(d.algo, d.proto, d.channels > 0 ? d.channels : m.defaultChannels);
      if (d.algo == expect[mi].algo && d.proto == expect[mi].proto) ++exact;
      // The target: within 1.03x of the best fixed choice. Model 3's best two are 4.8% apart at 2 us with
      // launch skew twice the kernel time, which ~20 calls cannot always resolve: there, within 1.05x. At most 1%
      // of seeds may miss: a duel arm whose unskewed samples are hit by two of the 4% outliers (model 0, 1 seed
      // of 100 since every departure from NCCL's choice is dueled).
      if (got > best * (mi == 3 ? 1.05 : 1.03)) {
        ++missed;
        fprintf(stderr, "model %d seed %u: %.2fx the best\n", mi, seed, got / best);
      }
      // The learning cost: calls that did not run the final choice. Screening (6 x 2), confirming (~4), the
      // challengers' duel calls (4 each: the best other arm if within 15%, NCCL's choice if the screen left it)
      // and the channel variants (2 x 2): up to ~28 calls.
      int off = 0;
      for (size_t i = 0; i < sim.history[0].size(); ++i)
        if (const Decision& h = sim.history[0][i];
            h.algo != d.algo || h.proto != d.proto || (h.channels > 0 && h.channels != d.channels))
          ++off;
      // With the measurement lag of this model (6 calls), an arm screened last may still be the winner: the
      // confirm calls and the tail went to the leader of the moment (model 0 from a 2 MiB cost table).
      EXPECT_LE(off, 38) << "model " << mi << " seed " << seed;
      // Settled (every stage committed, the profiler released) within the budget plus the measurement lag.
      EXPECT_GT(settledAt, 0);
      EXPECT_LE(settledAt, 56) << "model " << mi << " seed " << seed;  // 52 before NCCL's choice joined every duel
      EXPECT_EQ(sim.history[0], sim.history[1]) << "local ranks diverged";
      if (getenv("ICN_TEST_VERBOSE"))
        fprintf(stderr, "model %d seed %u off %d settled %d pick %d/%d/%d\n", mi, seed, off, settledAt, d.algo,
                d.proto, d.channels);
    }
    EXPECT_LE(missed, seeds / 100) << "model " << mi << ": picks over the target";
    EXPECT_GE(exact, mi == 3 ? seeds * 6 / 10 : seeds - seeds / 100) << "model " << mi << ": exact picks";
  }
}

TEST(Group, HostBoundRoundsKeepNcclsChoice) {
  // 32 KiB on H200 NVLink as measured: the host launches a call every ~13 us without the profiler and every
  // ~20-30 us with it; kernels take 2.7-18.7 us. Every period is the host's pace plus noise. NCCL's own pick from
  // this cost table, Ring/LL (kernel 8.6 us), costs 13 us a call like the best: it stays, whatever the noise says.
  Model m{{{5.7, 11.5, 13.6}, {11.6, 15.0, 21.7}}};  // GPU cost per call: kernel + 3 us
  setKernels(m, {{{2.7, 8.5, 10.6}, {8.6, 12.0, 18.7}}});
  m.hostUs = 25;
  m.skewUs = 3;
  auto cost = [&](int a, int p) { return std::max(13.0, m.us[a][p]); };  // per call without the profiler
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 15, Decision{1, 0, 0}, seeds, 7, cost);
  EXPECT_EQ(o.within, seeds) << "picks within 1.03x of Ring/LL";
  EXPECT_GE(o.exact, seeds * 9 / 10) << "NCCL's Ring/LL kept";
}

TEST(Group, HostBoundDeparturesFromNcclsChoiceAreDueled) {
  // 128 KiB on H200 NVLink (paired_proof): NCCL's Ring/LL costs 14.9 us a call, every other arm 1.05-1.45x
  // that. Profiled, the host's pace sets every period and wanders from 13.5 to 35 us, so a screen now and then
  // puts Ring/LL 1.5x above a lucky arm (Tree/LL128 13.5 us against Ring/LL 20.5): 2 of 4 processes left Ring/LL
  // for Tree/LL128 or Tree/LL and ran 1.05-1.08x slower. Such a departure must survive a duel against NCCL's
  // choice, run back to back, in which the host-bound rule keeps NCCL's choice unless it is clearly slower.
  Model m{{{16.3, 16.1, 21.3}, {14.9, 16.1, 21.5}}};
  setKernels(m, {{{3.7, 8.9, 8.8}, {3.9, 11.5, 16.3}}});
  m.hostUs = 22;
  m.hostSpread[0] = 0.6;
  m.hostSpread[1] = 1.6;
  auto cost = [&](int a, int p) { return std::max(14.9, m.us[a][p]); };
  const uint32_t seeds = testSeeds();
  // NCCL 2.28 picks Ring/LL there (realisticTable would say Ring/LL128).
  auto ringLlFirst = [](float* t, double bytes) {
    realisticTable(t, bytes);
    t[1 * 3 + 0] = 0.9f * t[1 * 3 + 1];
  };
  Outcome o = convergeRuns(m, 1 << 17, Decision{1, 0, 0}, seeds, 41, cost, 1, ringLlFirst);
  // Without the duel 80 of 100 seeds (254 of 300). The rest: duels whose Ring/LL samples drew the slow end of
  // the host's pace (this model's pace is uniform over 0.6-1.6x, a sample at 1.5x its rival's is no rare event).
  EXPECT_GE(o.within, seeds * 9 / 10) << "NCCL's Ring/LL kept";
}

TEST(Group, HostBoundRoundsLeaveAClearlySlowerNcclChoiceForTheShortestKernel) {
  // As above, but NCCL's pick (Ring/LL) costs 40 us a call on the GPU, far above the host's pace: its periods give
  // it away. The others run at the host's pace while measured, so their kernels decide: Tree/LL (13 us a call
  // unprofiled, like Tree/LL128; Ring/LL128 15, Ring/Simple 21.7).
  Model m{{{5.7, 11.5, 13.6}, {40.0, 15.0, 21.7}}};
  setKernels(m, {{{2.7, 8.5, 10.6}, {37.0, 12.0, 18.7}}});
  m.hostUs = 25;
  m.skewUs = 3;
  auto cost = [&](int a, int p) { return std::max(13.0, m.us[a][p]); };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 15, Decision{0, 0, 0}, seeds, 7, cost);
  EXPECT_GE(o.within, seeds * 19 / 20) << "picks within 1.03x of Tree/LL";
}

TEST(Group, HostBoundRoundsTakeASameAlgorithmArmWithAClearlyShorterKernel) {
  // NVLink 2-4 MiB on 2 H200: profiled, every arm runs at the host's pace (32-52 us a call), so periods cannot rank
  // them; unprofiled the kernels outlast the host and decide. NCCL's pick Ring/Simple (23.6 us kernel) costs
  // 29.3 us a call, Ring/LL (17.5) 24.3: within one algorithm the shorter kernel wins. Tree/Simple's kernel is the
  // shortest of all (16.2) but its call costs 29.5: other algorithms' kernels must not decide.
  Model m{{{28.3, 29.2, 29.5}, {24.3, 24.2, 29.3}}};
  setKernels(m, {{{17.3, 22.2, 16.2}, {17.5, 18.9, 23.6}}});
  m.hostUs = 40;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 22, Decision{1, 1, 0}, seeds, 37, cost);
  // Without the rule 2 of 100 seeds. The rest: rounds whose best period falls under twice the fastest kernel are
  // not host-bound, rank by period noise and may end on a Tree arm (6 of 100).
  EXPECT_GE(o.within, seeds * 9 / 10) << "picks within 1.03x of Ring/LL128 (Ring/LL or Ring/LL128)";
}

TEST(Group, RanksByPeriodWhenKernelTimeMissesPerCallCost) {
  // 8 MiB on H200 NVLink as measured: Tree/Simple's kernel is short (43 us) but a call costs 65 us (setup
  // outside the kernel's work loop); Ring/LL128 costs what its kernel takes. The GPU is the bottleneck, the best
  // period is far below any "host pace", and the period must decide.
  Model m{{{83.0, 77.0, 65.0}, {76.0, 48.5, 49.4}}};
  setKernels(m, {{{77.0, 73.0, 43.0}, {73.0, 44.0, 45.2}}});
  m.hostUs = 13;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  // The 1.03x check against Ring/LL128 (48.5 us) rules out Tree/Simple (65 us), the arm with the shortest kernel.
  // Ring/Simple (49.4 us) is NCCL's own pick from this table and Ring/LL128 must beat it by 3% to replace it, so
  // either may stay.
  Outcome o = convergeRuns(m, 1 << 23, Decision{1, 1, 0}, seeds, 11, cost);
  EXPECT_EQ(o.within, seeds) << "picks within 1.03x of Ring/LL128";
}

TEST(Group, MidSizesOnASlowHostRankByPeriod) {
  // 2 MiB on H200 NVLink, measured on a host whose launches (with the profiler on) come every 27-35 us: kernels
  // 16.5 us (Tree/Simple) to 24 us, the fastest 0.6 of the best period. Tree/Simple's short kernel hides 12.6 us
  // per call outside it (29.1 us a call, Ring/LL128 24.5): ranked by kernel time it won and ran 1.2x slower.
  Model m{{{28.1, 29.3, 29.1}, {24.1, 24.5, 29.3}}};
  setKernels(m, {{{20.3, 23.7, 16.5}, {20.1, 19.7, 24.4}}});
  m.hostUs = 25;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 21, Decision{1, 1, 0}, seeds, 29, cost);
  EXPECT_GE(o.within, seeds * 19 / 20) << "picks within 1.03x of Ring/LL128";
}

TEST(Group, AcrossNodesKernelTimesDoNotRank) {
  // 8 KiB on the net path as measured: Tree/LL's kernel shows 2.4 us but a call costs 30 us (the network wait is
  // not in its kernel time), Ring/LL's kernel 9 us for 23 us per call. Periods are the GPU cost here (not
  // host-bound) but the fastest kernel is far below the best period, which on one node would mean "host-bound".
  Model m{{{30.0, 36.0, 41.0}, {23.0, 35.0, 54.0}}};
  setKernels(m, {{{2.4, 30.0, 35.0}, {9.0, 30.0, 48.0}}});
  m.hostUs = 13;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 13, Decision{1, 0, 0}, seeds, 13, cost, /*nNodes=*/2);
  // A 3x outlier among Ring/LL's few screening samples can still cost it the round (1-2% of seeds).
  EXPECT_GE(o.within, seeds * 19 / 20) << "picks within 1.03x of Ring/LL";
  EXPECT_GE(o.exact, seeds * 9 / 10) << "Ring/LL (best period) exact picks";
}

TEST(Group, AcrossNodesAlternatingPeriodsAreAveraged) {
  // Net path as measured: Tree arms' periods alternate short and long (lower quartile 6.5 us for a real 30 us
  // per call), Ring/LL's are steady at 23 us. A low quantile picks Tree/LL; the trimmed mean picks Ring/LL.
  Model m{{{30.0, 36.0, 41.0}, {23.0, 35.0, 54.0}}};
  m.alternate[0][0] = m.alternate[0][1] = m.alternate[0][2] = 0.75;
  m.hostUs = 13;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 13, Decision{1, 0, 0}, seeds, 17, cost, /*nNodes=*/2);
  EXPECT_GE(o.within, seeds * 19 / 20) << "picks within 1.03x of Ring/LL";
  EXPECT_GE(o.exact, seeds * 9 / 10) << "Ring/LL exact picks";
}

TEST(Group, AcrossNodesAnArmsFirstCallDoesNotCount) {
  // Net path, 8 MiB: Tree/Simple costs 554 us per call back to back, Ring/Simple 513 us; Tree/Simple's first call
  // after another arm measured 434 us (x0.78). The test uses x0.65 so that the confirm calls (consecutive, hence
  // mostly full price) cannot rescue a plan that counts first calls: then Ring/Simple loses in ~25% of seeds.
  Model m{{{2540.0, 3866.0, 554.0}, {2663.0, 871.0, 513.0}}};
  m.switchDiscount[0][2] = 0.35;
  m.hostUs = 13;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 23, Decision{1, 2, 0}, seeds, 19, cost, /*nNodes=*/2);
  EXPECT_GE(o.within, seeds * 19 / 20) << "picks within 1.03x of Ring/Simple";
}

TEST(Group, DuelOverturnsALuckyScreen) {
  // NVLink, 32 MiB as measured on 2 H200: Tree/Simple's first call after another arm ran 131 us, back to back
  // 142-144 us; Ring/Simple (NCCL's pick) 139 us. Screened on two calls, Tree/Simple's lower quartile is the lucky
  // first call's and it won the round; its own back-to-back calls in the duel give it away.
  Model m{{{303.0, 155.0, 144.0}, {285.0, 148.0, 139.0}}};
  m.switchDiscount[0][2] = 0.09;
  m.skewUs = 2;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 25, Decision{1, 2, 0}, seeds, 23, cost);
  // At most 1% of seeds may miss: without the LL arms (NCCL's model puts them far above its choice at 32 MiB, so
  // they are not screened) a screen lucky by over 15% (two discounted calls, noise 3.5 sigma low) skips the duel in
  // 2 of 300 seeds; with them it did in none of 300.
  EXPECT_GE(o.within, seeds - seeds / 100) << "picks within 1.03x of Ring/Simple";
}

TEST(Group, DuelConfirmsEveryDepartureFromNcclsChoice) {
  // Net path, 8 MiB, as measured on 2 H200 (paired benchmark, 3 of 3 processes): Tree/Simple's calls right after
  // another arm's cost 325-356 us, back to back 517-568 us; NCCL's pick Ring/Simple 497-534 us. Screened on two
  // calls Tree/Simple looks 1.5x faster, far outside the duel's 15%: the screen's departure from NCCL's choice must
  // still be confirmed back to back.
  Model m{{{2700.0, 2000.0, 558.0}, {3400.0, 900.0, 533.0}}};
  m.switchDiscount[0][2] = 0.4;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 23, Decision{1, 2, 0}, seeds, 29, cost);
  EXPECT_GE(o.within, seeds - seeds / 20) << "picks within 1.03x of Ring/Simple";
}

TEST(Group, AcrossNodesDuelsRankOnCallsPastTheSwitch) {
  // Net path, 8 MiB (nNodes 2): Tree/Simple's calls after a switch start 40% cheaper and reach their full cost
  // (540 us, Ring/Simple 500) only after 6 calls back to back, as the paired benchmark showed on 2 H200 (325-356 us
  // screened, 396-459 over calls 2-4 of a duel block, 482-560 running on). A duel ranking on calls 2-4 keeps
  // Tree/Simple; 8-call blocks ranked on their last 4 calls see it.
  Model m{{{2700.0, 2000.0, 540.0}, {3400.0, 900.0, 500.0}}};
  m.switchDiscount[0][2] = 0.4;
  m.switchRampCalls = 6;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  Outcome o = convergeRuns(m, 1 << 23, Decision{1, 2, 0}, seeds, 31, cost, /*nNodes=*/2);
  EXPECT_GE(o.within, seeds - seeds / 20) << "picks within 1.03x of Ring/Simple";
}

TEST(Group, LongCallsOnOneNodeLeaveNcclsChoiceForATwoPercentGain) {
  // 2 GiB on 2 H200 NVLink: Tree/Simple 2.6% faster than NCCL's Ring/Simple, GPU-bound calls of 6 ms that agree
  // within a fraction of a percent. On one node the 1% margin for calls of 1 ms and more takes it; across nodes the
  // 3% margin stays (network periods wander more), so NCCL's choice is kept there.
  Model m{{{30000.0, 9000.0, 6100.0}, {24000.0, 6600.0, 6260.0}}};
  m.noise = 0.004;
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  // With a 3% margin on one node 2 of 100 seeds take Tree/Simple; with 1% across nodes 1 of 100 keeps Ring/Simple.
  Outcome one = convergeRuns(m, uint64_t{1} << 31, Decision{0, 2, 0}, seeds, 53, cost);
  EXPECT_GE(one.exact, seeds - seeds / 20) << "one node: Tree/Simple";
  Outcome across = convergeRuns(m, uint64_t{1} << 31, Decision{1, 2, 0}, seeds, 53, cost, /*nNodes=*/2);
  EXPECT_GE(across.exact, seeds * 9 / 10) << "across nodes: NCCL's Ring/Simple kept";
}

TEST(Group, ChannelStageFindsFewerChannels) {
  Model m{{{30, 20, 25}, {28, 15, 18}}};
  m.perChannel = -0.25;  // halving the channels is 25% faster
  Sim sim(2, 2, onlineCfg(), 99);
  for (int i = 0; i < 150; ++i) sim.step(m, 1 << 16);
  Decision d = sim.current(1 << 16);
  EXPECT_EQ(d, (Decision{1, 1, 4}));
  EXPECT_EQ(sim.history[0], sim.history[1]);
}

TEST(Group, ReexploresOnDrift) {
  Model before{{{13.8, 16.0, 25.0}, {15.5, 17.0, 24.0}}};
  Model after{{{60.0, 12.0, 25.0}, {15.5, 17.0, 24.0}}};  // Tree/LL got 4x slower: Tree/LL128 is best now
  Sim sim(2, 2, onlineCfg(), 5);
  for (int i = 0; i < 100; ++i) sim.step(before, 64);
  ASSERT_EQ(sim.current(64), (Decision{0, 0, 0}));
  // Settled: the profiler is off, so drift is only seen through a sampling window (the context opens one now
  // and then); keep one open here.
  demandChanged(1);
  for (int i = 0; i < 200; ++i) sim.step(after, 64);
  demandChanged(-1);
  Decision d = sim.current(64);
  EXPECT_EQ(d.algo, 0);
  EXPECT_EQ(d.proto, 1);
  EXPECT_EQ(sim.history[0], sim.history[1]);
}

TEST(Group, NoDriftOnStableNoise) {
  Model m{{{13.8, 16.0, 25.0}, {15.5, 17.0, 24.0}}};
  m.skewUs = 6;  // every other sample carries launch skew: not drift
  for (uint32_t seed : {11u, 12u, 13u, 14u}) {
    Sim sim(2, 2, onlineCfg(), seed);
    for (int i = 0; i < 100; ++i) sim.step(m, 64);
    Decision d = sim.current(64);
    int demand = measurementDemand().load();
    demandChanged(1);  // a sampling window held open all along: every call is measured and checked for drift
    for (int i = 0; i < 2000; ++i) sim.step(m, 64);
    demandChanged(-1);
    for (size_t i = 100; i < sim.history[0].size(); ++i)
      ASSERT_EQ(sim.history[0][i], d) << "re-explored at call " << i << " seed " << seed;
    EXPECT_EQ(sim.group->phase(coll::kAllReduce, 6), BucketExplorer::Phase::Settled);
    EXPECT_EQ(measurementDemand().load(), demand);
  }
}

// nccl-tests' warm-up calls every power of two a few times and never again: those buckets stop mid-exploration.
// They must not keep the profiler on for the rest of the run, and must finish when their calls come back.
TEST(Group, IdleExploringBucketsReleaseTheProfiler) {
  Model m{{{13.8, 16.0, 25.0}, {15.5, 17.0, 24.0}}};
  int before = measurementDemand().load();
  Sim sim(2, 2, onlineCfg(), 21);
  for (int b = 3; b < 12; ++b)
    for (int i = 0; i < 5; ++i) sim.step(m, uint64_t{1} << b);
  EXPECT_GT(measurementDemand().load(), before);
  for (int i = 0; i < 200; ++i) sim.step(m, 1 << 20);
  EXPECT_EQ(sim.group->phase(coll::kAllReduce, 20), BucketExplorer::Phase::Settled);
  EXPECT_EQ(sim.group->phase(coll::kAllReduce, 5), BucketExplorer::Phase::Exploring);
  EXPECT_EQ(measurementDemand().load(), before) << "idle exploring buckets still hold the profiler";
  // Back to an unfinished bucket: it measures again and settles.
  sim.step(m, 32);
  EXPECT_EQ(measurementDemand().load(), before + 1);
  for (int i = 0; i < 60; ++i) sim.step(m, 32);
  EXPECT_EQ(sim.group->phase(coll::kAllReduce, 5), BucketExplorer::Phase::Settled);
  EXPECT_EQ(sim.current(32), (Decision{0, 0, 0}));
  EXPECT_EQ(sim.history[0], sim.history[1]);
}

// Ranks in different processes: each process has its own Group with one member. Measurements differ, yet every
// call index gets the same decision in both, and nothing measured is applied (only learned for the cache).
TEST(Group, DistributedRanksAgreeWithoutCommitting) {
  Model m{{{40.0, 30.0, 35.0}, {33.0, 23.8, 29.7}}};
  Sim a(2, 1, onlineCfg(), 1, 6, 0x77), b(2, 1, onlineCfg(), 2, 3, 0x77);
  for (int i = 0; i < 120; ++i) {
    a.step(m, 1 << 21);
    b.step(m, 1 << 21);
  }
  EXPECT_EQ(a.history[0], b.history[0]);
  EXPECT_FALSE(a.current(1 << 21).valid());
  auto learned = a.group->learnedEntries();
  ASSERT_EQ(learned.size(), 1u);
  EXPECT_EQ(learned[0].decision, (Decision{1, 1, 0}));
  EXPECT_EQ(learned[0].bucket, 21);
}

TEST(Group, DistributedRanksAgreeAcrossBuckets) {
  // Processes measure different noise, so they learn different winners (Ring and Tree Simple/LL128 within 3%)
  // and see the LL arms on either side of the skip threshold (3x). Neither may change the next bucket's plan:
  // the same call index must run the same algorithm everywhere.
  Model m{{{905.0, 310.0, 301.0}, {895.0, 302.0, 300.0}}};
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    Sim a(2, 1, onlineCfg(), seed, 6, 0x78 + seed), b(2, 1, onlineCfg(), seed + 100, 3, 0x78 + seed);
    for (uint64_t bytes : {uint64_t{1} << 24, uint64_t{1} << 25, uint64_t{1} << 27})
      for (int i = 0; i < 80; ++i) {
        a.step(m, bytes);
        b.step(m, bytes);
      }
    ASSERT_EQ(a.history[0], b.history[0]) << "seed " << seed;
  }
}

TEST(Group, LargeBucketsSkipArmsFarSlowerInASmallerOne) {
  // 8 MiB on the net path: LL arms 5x Ring/Simple. At 32 MiB (same ratios here) they are not screened again;
  // with microsecond calls (the same ratios at 2 KiB) every arm is.
  Model large{{{2540.0, 3866.0, 554.0}, {2663.0, 871.0, 513.0}}};
  Model small{{{25.4, 38.7, 5.54}, {26.6, 8.71, 5.13}}};
  for (const Model* m : {&large, &small}) {
    Sim sim(2, 2, onlineCfg(), 5);
    sim.table = mildLlTable;  // NCCL's model alone would not skip them
    uint64_t from = m == &large ? 23 : 11;
    for (int i = 0; i < 80; ++i) sim.step(*m, uint64_t{1} << from);
    size_t mark = sim.history[0].size();
    for (int i = 0; i < 80; ++i) sim.step(*m, uint64_t{1} << (from + 2));
    int llCalls = 0;
    for (size_t i = mark; i < sim.history[0].size(); ++i) llCalls += sim.history[0][i].proto == 0;
    if (m == &large) {
      EXPECT_EQ(llCalls, 0) << "LL arms screened again at 2^25 B";
    } else {
      EXPECT_GE(llCalls, 2 * 2) << "cheap calls: both LL arms screened";
    }
    Decision d = sim.current(uint64_t{1} << (from + 2));
    EXPECT_EQ(d.algo, 1);
    EXPECT_EQ(d.proto, 2);
  }
}

TEST(Group, LargeBucketsSkipArmsNcclsModelPutsFarAbove) {
  // 512 MiB explored first (nccl-tests' warm-up reaches it with nothing smaller measured): NCCL's model
  // (realisticTable: LL 7-15x Simple there) keeps the LL arms out of the plan, in one process and across
  // processes alike (the table is the same on every rank). Ring/Simple is fastest.
  Model big{{{52000.0, 9100.0, 4100.0}, {26000.0, 4300.0, 3900.0}}};
  Sim one(2, 2, onlineCfg(), 11);
  Sim a(2, 1, onlineCfg(), 12, 6, 0x5E1), b(2, 1, onlineCfg(), 13, 3, 0x5E1);
  for (int i = 0; i < 60; ++i) {
    one.step(big, uint64_t{1} << 29);
    a.step(big, uint64_t{1} << 29);
    b.step(big, uint64_t{1} << 29);
  }
  for (const auto* h : {&one.history[0], &one.history[1], &a.history[0]})
    for (const Decision& d : *h) EXPECT_NE(d.proto, 0) << "an LL arm was screened at 512 MiB";
  EXPECT_EQ(a.history[0], b.history[0]);
  Decision d = one.current(uint64_t{1} << 29);
  EXPECT_EQ(d.algo, 1);
  EXPECT_EQ(d.proto, 2);
  // With LL only mildly slower in NCCL's model, or with cheap calls, LL arms stay in the plan.
  using TableFn = void (*)(float*, double);
  for (auto [tableFn, bytes] : {std::pair<TableFn, uint64_t>{mildLlTable, uint64_t{1} << 29},
                                std::pair<TableFn, uint64_t>{realisticTable, uint64_t{1} << 11}}) {
    Sim sim(2, 2, onlineCfg(), 14);
    sim.table = tableFn;
    for (int i = 0; i < 60; ++i) sim.step(big, bytes);
    int ll = 0;
    for (const Decision& x : sim.history[0]) ll += x.proto == 0;
    EXPECT_GE(ll, 2) << "no LL arm screened at " << bytes << " B";
  }
}

TEST(Group, StaticModeUsesCacheAndNeverExplores) {
  GroupConfig cfg;
  cfg.mode = Mode::Static;
  std::vector<CacheEntry> cache = {{coll::kAllReduce, 2, 1, 21, Decision{1, 1, 0}, 23.8, 12},
                                   {coll::kAllReduce, 8, 1, 10, Decision{0, 0, 0}, 1.0, 1}};  // other nRanks
  int demandBefore = measurementDemand().load();
  Group g(0x5151, 2, 1, cfg, cache);
  int s0 = g.join(), s1 = g.join();
  for (int i = 0; i < 50; ++i)
    for (int s : {s0, s1}) {
      float t[21];
      realisticTable(t, 1 << 21);
      EXPECT_EQ(g.decide(s, coll::kAllReduce, 21, CostTable(t, 7, 3)), (Decision{1, 1, 0}));
      realisticTable(t, 1 << 10);
      EXPECT_FALSE(g.decide(s, coll::kAllReduce, 10, CostTable(t, 7, 3)).valid());
    }
  EXPECT_EQ(measurementDemand().load(), demandBefore);
  EXPECT_TRUE(g.learnedEntries().empty());
}

TEST(Group, ExplorationRaisesMeasurementDemandUntilSettled) {
  int before = measurementDemand().load();
  {
    Sim sim(1, 1, onlineCfg(), 3);
    Model m{{{13.8, 16.0, 25.0}, {15.5, 17.0, 24.0}}};
    sim.step(m, 64);
    EXPECT_EQ(measurementDemand().load(), before + 1);
    for (int i = 0; i < 100; ++i) sim.step(m, 64);
    EXPECT_EQ(measurementDemand().load(), before);
  }
  EXPECT_EQ(measurementDemand().load(), before);
}

// Two local ranks decide on their own threads while a "proxy thread" feeds measurements concurrently: every call
// index must still get the same decision on both ranks (run under ICN_SANITIZE=thread for the data-race check).
TEST(Group, ConcurrentRanksAndMeasurementsStayConsistent) {
  GroupConfig cfg = onlineCfg();
  cfg.explore.callsPerArm = 1;
  cfg.explore.confirmCalls = 1;
  cfg.explore.driftWindow = 4;
  cfg.explore.driftWindows = 1;
  Group g(0xC0C0, 2, 1, cfg, {});
  int slots[2] = {g.join(), g.join()};
  constexpr int kCalls = 20000;
  std::vector<Decision> seen[2];
  std::atomic<bool> stop{false};
  std::atomic<int> progress{0};
  std::thread feeder([&] {
    std::mt19937 rng(3);
    for (uint64_t n = 0; !stop.load(); ++n) {
      int a = rng() % 2, p = rng() % 3;
      // Alternating regimes (Ring/LL128 fast, then slow) make drift fire and re-exploration run while the ranks
      // keep calling.
      bool fastRegime = (progress.load() / 5000) % 2 == 0;
      double us = (a == 1 && p == 1) ? (fastRegime ? 10.0 : 80.0) : 20.0 + p;
      g.addSample(coll::kAllReduce, 12, Sample{a, p, 8, us});
    }
  });
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      for (int i = 0; i < kCalls; ++i) {
        float t[21];
        realisticTable(t, 4096);
        seen[r].push_back(g.decide(slots[r], coll::kAllReduce, 12, CostTable(t, 7, 3)));
        if (r == 0) progress.store(i);
        if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
  for (auto& t : ranks) t.join();
  stop = true;
  feeder.join();
  ASSERT_EQ(seen[0].size(), seen[1].size());
  int changes = 0;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(seen[0][i], seen[1][i]) << "call " << i;
    if (i && !(seen[0][i] == seen[0][i - 1])) ++changes;
  }
  // At least the exploration schedule ran; with luck the regime switch also triggered a re-exploration (timing
  // dependent, so not asserted).
  EXPECT_GE(changes, 5);
}

// Exploring is cheap against what it can gain: summed over a size's first 2000 calls, the calls it runs cost at
// most 5% more than NCCL's own choice would have, on one node and across nodes (quiet duels, 3 screening calls),
// whether NCCL's choice is the best (all exploration is cost) or another arm is (the gain pays for it), and where
// some arms are several times slower (LL at 4 MiB).
TEST(Group, ExplorationCostsAtMostFivePercentOverNcclsChoiceInTheFirst2000Calls) {
  struct Case {
    Model m;
    uint64_t bytes;
    int nNodes;
  };
  Model llSlow{{{160, 70, 52}, {140, 40, 47}}};  // 4 MiB: NCCL's model picks Ring/Simple, Ring/LL128 is best
  Model ncclBest{{{160, 70, 60}, {140, 55, 47}}};  // 4 MiB: NCCL's Ring/Simple is best, LL 3x
  Model small{{{13.8, 16.0, 25.0}, {15.5, 17.0, 24.0}}};  // 2 MiB table, Tree/LL best
  const Case cases[] = {{llSlow, 4 << 20, 1}, {ncclBest, 4 << 20, 1}, {small, 1 << 21, 1},
                        {llSlow, 4 << 20, 2}, {ncclBest, 4 << 20, 2}};
  for (const Case& k : cases) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      GroupConfig cfg = onlineCfg();
      if (k.nNodes > 1) cfg.explore.quietDuelCalls = 12;
      Sim sim(2, 2, cfg, seed * 7 + k.nNodes, 6, 0, k.nNodes);
      for (int i = 0; i < 2000; ++i) sim.step(k.m, k.bytes);
      float t[21];
      realisticTable(t, static_cast<double>(k.bytes));
      auto base = ncclPick(t);
      double ours = 0, nccl = 2000 * k.m.time(base.first, base.second, k.m.defaultChannels);
      for (const Decision& d : sim.history[0]) {
        int a = d.algo >= 0 ? d.algo : base.first, p = d.proto >= 0 ? d.proto : base.second;
        ours += k.m.time(a, p, d.channels > 0 ? std::min<int>(d.channels, 16) : k.m.defaultChannels);
      }
      EXPECT_LE(ours / nccl, 1.05) << "model " << k.m.us[1][2] << " nNodes " << k.nNodes << " seed " << seed;
      if (seed == 1)
        printf("EXPLORE_COST %llu B nNodes=%d: %.4fx NCCL's choice over 2000 calls\n",
               static_cast<unsigned long long>(k.bytes), k.nNodes, ours / nccl);
    }
  }
}
