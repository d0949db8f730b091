// The group tests' harness: synthetic timing models, a simulated pair of local ranks that plays NCCL's and the
// profiler's part (event mask read at enqueue, timings through the real PeriodTracker, late samples), and helpers.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "nccl_pick.h"
#include "telemetry/period_tracker.h"
#include "tuner/explore/params.h"
#include "tuner/group.h"

namespace group_sim {
using namespace icn;
using namespace icn::tuner;


struct Model {
  double us[2][3];         // Tree/Ring x LL/LL128/Simple at NCCL's channel count
  int defaultChannels = 8;
  double perChannel = 0;   // relative gain per channel halving (< 0: fewer channels are faster)
  double skewUs = 0;       // rank 0's kernel waits this long for rank 1's launch (one thread launches both)
  // Kernel work time per arm; 0 = 95% of the per-call cost (GPU-bound: the kernel is most of a call).
  double kernel[2][3] = {};
  // Host-bound: launches come at this pace (x 0.8-1.3: the profiler's own work, the other rank's launch), so a
  // period is max(host pace, GPU cost); 0 = never host-bound.
  double hostUs = 0;
  double hostSpread[2] = {0.8, 1.3};  // the host pace's range, as multiples of hostUs
  double noise = 0.03;                // relative standard deviation of every measured time
  // Periods alternate (1 - a, 1 + a) x cost from call to call (calls completing in pairs); 0 = steady.
  double alternate[2][3] = {};
  // A call right after another arm's costs this much less (part of each call's cost lands on the next call of
  // the same arm: back to back every call pays it).
  double switchDiscount[2][3] = {};
  // ... fading out over this many calls of the same arm (1: only the first call after a switch is cheaper).
  int switchRampCalls = 1;
  // A timed call costs this much more (NCCL's proxy op per channel reading the kernel's timestamps).
  double profiled[2][3] = {};
  double kernelTime(int a, int p, int ch) const {
    return kernel[a][p] > 0 ? kernel[a][p] * time(a, p, ch) / us[a][p] : 0.95 * time(a, p, ch);
  }
  double time(int a, int p, int ch) const {
    double t = us[a][p];
    if (ch < defaultChannels) t *= 1 + perChannel;
    if (ch > defaultChannels) t *= 1 - perChannel * 0.5;
    return t;
  }
};

struct Sim {
  std::shared_ptr<Group> group;
  std::vector<int> slots;
  std::mt19937 rng;
  std::deque<std::pair<int, Sample>> inflight;  // (bucket, sample): a late sample names its own bucket
  int lag;
  bool prevMeasured = false;
  uint64_t calls = 0;
  int prevArm[16];
  int sinceSwitch[16] = {};  // calls of the same arm since the last switch, per slot
  // The profiler adapter's side, per slot: GPU clock, timed collectives, and the real period tracker.
  double clock[16] = {};
  uint64_t timed[16] = {};
  uint32_t epoch = 0;
  std::array<telemetry::PeriodTracker, 16> trackers{};
  std::vector<std::vector<Decision>> history;  // per slot, per call index
  void (*table)(float*, double) = realisticTable;  // NCCL's cost table for a call of this many bytes
  Sim(int nRanks, int localSlots, GroupConfig cfg, uint32_t seed, int lag_ = 6, uint64_t commId = 0, int nNodes = 1)
      : rng(seed), lag(lag_) {
    std::fill(std::begin(prevArm), std::end(prevArm), -1);
    cfg.explore = acrossNodes(cfg.explore, nNodes);  // as the plugin's contexts shape it (one-node quiet duels stay)
    group = std::make_shared<Group>(commId ? commId : 0xABC0 + seed, nRanks, nNodes, cfg, std::vector<CacheEntry>{});
    for (int i = 0; i < localSlots; ++i) slots.push_back(group->join());
    history.resize(localSlots);
  }
  // One collective call on every local rank; measurements come back `lag` calls later with noise and outliers.
  void step(const Model& m, uint64_t bytes) {
    std::normal_distribution<double> noise(1.0, m.noise);
    // Like NCCL: the event mask is read when the collectives are enqueued, before the tuner is asked; and like
    // the profiler adapter: a call's cost is measured from the end of the previous timed call (PeriodTracker), so
    // the first timed call after an untimed one gives no sample of its own, only a span where it qualifies.
    bool measured = measurementWanted();
    if (measured && !prevMeasured) ++epoch;
    prevMeasured = measured;
    for (size_t s = 0; s < slots.size(); ++s) {
      float t[21];
      table(t, static_cast<double>(bytes));
      CostTable ct(t, 7, 3);
      Decision d = group->decide(slots[s], coll::kAllReduce, coll::bucketOf(bytes), ct);
      if (d.valid()) ct.force(d);
      history[s].push_back(d);
      auto [a, p] = ncclPick(t);
      int ch = d.channels > 0 ? std::min<int>(d.channels, 16) : m.defaultChannels;
      double n = noise(rng), outlier = rng() % 25 == 0 ? 3.0 : 1.0, skew = s == 0 ? m.skewUs : 0.0;
      double gpu = m.time(a, p, ch) * n;
      double host =
          m.hostUs > 0 ? m.hostUs * std::uniform_real_distribution<double>(m.hostSpread[0], m.hostSpread[1])(rng) : 0.0;
      double alt = m.alternate[a][p] * (calls % 2 ? 1.0 : -1.0);
      sinceSwitch[s] = prevArm[s] != a * 3 + p ? 0 : sinceSwitch[s] + 1;
      prevArm[s] = a * 3 + p;
      double ramp = std::max(0.0, 1.0 - static_cast<double>(sinceSwitch[s]) / std::max(1, m.switchRampCalls));
      gpu *= 1 - m.switchDiscount[a][p] * ramp;
      if (measured) gpu *= 1 + m.profiled[a][p];
      double us = std::max(gpu * (1 + alt), host) * outlier + skew;
      double kernelUs = m.kernelTime(a, p, ch) * n * outlier + skew;
      clock[s] += us;
      if (!measured) continue;
      telemetry::CollTiming done{coll::kAllReduce, bytes, a, p, ch, static_cast<uint64_t>(kernelUs * 1000),
                                 static_cast<uint64_t>(clock[s] * 1000), timed[s]++, epoch, calls};
      std::array<telemetry::PeriodSample, 2> out;
      for (int i = 0, k = trackers[s].complete(done, out); i < k; ++i) {
        const telemetry::CollTiming& c = out[i].timing;
        inflight.push_back({coll::bucketOf(bytes),
                            Sample{c.algo, c.proto, c.channels, out[i].periodUs, c.gpuNs / 1000.0, out[i].calls}});
      }
    }
    ++calls;
    while (inflight.size() > static_cast<size_t>(lag) * slots.size()) {
      group->addSample(coll::kAllReduce, inflight.front().first, inflight.front().second);
      inflight.pop_front();
    }
  }
  Decision current(uint64_t bytes) { return group->currentDecision(coll::kAllReduce, coll::bucketOf(bytes)); }
};

inline uint32_t testSeeds() {  // ICN_TEST_SEEDS=100 runs more seeds
  const char* v = getenv("ICN_TEST_SEEDS");
  return v ? static_cast<uint32_t>(atoi(v)) : 20;
}

inline void setKernels(Model& m, const std::array<std::array<double, 3>, 2>& k) {
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 3; ++p) m.kernel[a][p] = k[a][p];
}

// NCCL's model with the LL protocols at most 1.4x Ring/Simple's cost at any size: never far enough for
// skipSlowLl, so only measurements can skip them.
inline void mildLlTable(float* t, double bytes) {
  realisticTable(t, bytes);
  const float bw[2][3] = {{100.f, 105.f, 110.f}, {120.f, 130.f, 140.f}};  // GB/s
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 3; ++p) t[a * 3 + p] = 10.f + static_cast<float>(bytes / (bw[a][p] * 1e3));
}

inline GroupConfig onlineCfg() {
  GroupConfig c;
  c.mode = Mode::Online;
  return c;  // defaults: 2 screening calls per candidate, 2 x 2 confirm calls, 2 x 2 channel calls
}

// 128 KiB on the net path of 2 H200 (paired_proof; NCCL sees two nodes there): untimed, Tree/Simple
// costs 89 us a call, NCCL's Ring/LL 127, Tree/LL 100; timed, Tree/Simple's calls cost 40% more (114-127 us),
// the others' 2%. Its first calls after a switch are cheaper, so it wins the screen.
inline Model net128KiB() {
  Model m{{{100, 112, 89}, {127, 120, 98}}};
  for (auto& row : m.profiled) std::fill(std::begin(row), std::end(row), 0.02);
  m.profiled[0][2] = 0.40;
  m.switchDiscount[0][2] = 0.45;
  m.switchRampCalls = 3;
  return m;
}

// NCCL 2.28 picks Ring/LL at 32-128 KiB where realisticTable would say Ring/LL128 or Ring/Simple.
inline void ringLlFirstTable(float* t, double bytes) {
  realisticTable(t, bytes);
  t[1 * 3 + 0] = 0.9f * std::min(t[1 * 3 + 1], t[1 * 3 + 2]);
}


// Run `seeds` simulations of `m` at `bytes`: how many ended exactly on `expect`, and how many on a choice whose
// per-call cost (`cost`) is within 1.03x of `expect`'s.
struct Outcome {
  uint32_t exact = 0, within = 0;
};
template <typename Cost>
Outcome convergeRuns(const Model& m, uint64_t bytes, Decision expect, uint32_t seeds, uint32_t salt, Cost cost,
                     int nNodes = 1, void (*table)(float*, double) = realisticTable, GroupConfig cfg = onlineCfg()) {
  Outcome o;
  int bucket = coll::bucketOf(bytes);
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    Sim sim(2, 2, cfg, seed * 131 + salt, 6, 0, nNodes);
    sim.table = table;
    for (int i = 0; i < 120; ++i) sim.step(m, bytes);
    EXPECT_EQ(sim.group->phase(coll::kAllReduce, bucket), BucketExplorer::Phase::Settled);
    Decision d = sim.current(bytes);
    EXPECT_GE(d.algo, 0);
    EXPECT_GE(d.proto, 0);
    if (d.algo < 0 || d.proto < 0) continue;
    if (cost(d.algo, d.proto) <= cost(expect.algo, expect.proto) * 1.03) ++o.within;
    if (d.algo == expect.algo && d.proto == expect.proto) ++o.exact;
    EXPECT_EQ(sim.history[0], sim.history[1]) << "local ranks diverged";
    if (getenv("ICN_TEST_VERBOSE"))
      fprintf(stderr, "seed %u pick %d/%d/%d\n", seed, d.algo, d.proto, d.channels);
  }
  return o;
}

}  // namespace group_sim
