// Quiet duels on synthetic models: a duel block timed at two calls only and ranked by the span between (the
// profiler slows some arms far more than others), the event mask switched one call ahead, idle buckets parked,
// blocks cut by other sizes' calls run again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "core/log.h"
#include "group_sim.h"

using namespace group_sim;

TEST(Group, QuietDuelsRankWhatTheProfilerSlowsByItsUntimedCalls) {
  // net128KiB(): Tree/Simple wins the screen, and then duels: back to back, every call timed, it looks no better
  // than NCCL's Ring/LL and worse than Tree/LL.
  Model m = net128KiB();
  auto cost = [&](int a, int p) { return m.us[a][p]; };
  const uint32_t seeds = testSeeds();
  GroupConfig quiet = onlineCfg(), dense = onlineCfg();
  quiet.explore.quietDuelCalls = 12;  // the plugin's default across nodes (ICN_TUNER_QUIET_DUEL): a span of 8
  Outcome q = convergeRuns(m, 1 << 17, Decision{0, 2, 0}, seeds, 53, cost, 2, ringLlFirstTable, quiet);
  Outcome d = convergeRuns(m, 1 << 17, Decision{0, 2, 0}, seeds, 53, cost, 2, ringLlFirstTable, dense);
  EXPECT_GE(q.within, seeds * 9 / 10) << "quiet duels: Tree/Simple";
  EXPECT_LE(d.within, seeds / 2) << "every call timed: the profiler's toll decides (the model still shows it)";
}

TEST(Group, QuietDuelsSwitchTheProfilerOffInsideTheirBlocks) {
  // What NCCL is told, call by call: while a quiet duel runs, only each block's first and last call are timed.
  Model m{{{100, 112, 89}, {127, 120, 96}}};
  m.switchDiscount[0][2] = 0.35;
  GroupConfig cfg = onlineCfg();
  cfg.explore.quietDuelCalls = 8;
  int demandBefore = measurementDemand().load();
  {
    Sim sim(2, 2, cfg, 7, 6, 0, 1);
    sim.table = ringLlFirstTable;
    std::vector<bool> timed;
    for (int i = 0; i < 120; ++i) {
      timed.push_back(measurementWanted());
      sim.step(m, 1 << 17);
    }
    // Between the first and the last timed call (the exploration), untimed calls come in runs of six.
    size_t first = 0, last = timed.size() - 1;
    while (first < timed.size() && !timed[first]) ++first;
    while (last > first && !timed[last]) --last;
    int untimed = 0, runs = 0, run = 0;
    for (size_t i = first; i <= last; ++i) {
      if (!timed[i]) {
        ++untimed;
        ++run;
      } else if (run > 0) {
        EXPECT_EQ(run, 6) << "call " << i << ": six untimed calls between a block's timed ends";
        ++runs;
        run = 0;
      }
    }
    EXPECT_GE(runs, 2) << "a duel has two blocks or more";
    EXPECT_EQ(untimed, 6 * runs);
    EXPECT_EQ(sim.group->phase(coll::kAllReduce, 17), BucketExplorer::Phase::Settled);
    EXPECT_FALSE(measurementWanted()) << "settled: the profiler is off";
  }
  EXPECT_EQ(measurementDemand().load(), demandBefore);
}

TEST(Group, QuietDuelsParkBucketsThatWaitElsewhere) {
  // nccl-tests and the paired benchmark touch every size before they loop on each: the other buckets screen their
  // arms there and wait, holding the profiler, for their next calls. A quiet duel must not wait until they are
  // parked the usual way (64 idle decisions: most of its blocks); they give the profiler back at once. And a
  // bucket whose quiet request was cut short by other sizes' calls must not keep the profiler off.
  Model m = net128KiB();
  GroupConfig cfg = onlineCfg();
  cfg.explore.quietDuelCalls = 12;  // across nodes: spans of 8, timed at the 4th and last call
  int demandBefore = measurementDemand().load();
  {
    Sim sim(2, 2, cfg, 11, 6, 0, 2);
    sim.table = ringLlFirstTable;
    // 128 KiB's screen ends while the host has moved on (its last samples come late): its duel begins on its
    // next call, right after the other sizes' calls.
    for (auto [bytes, calls] : {std::pair<uint64_t, int>{1 << 17, 26}, {1 << 23, 40}, {1 << 25, 40}})
      for (int i = 0; i < calls; ++i) sim.step(m, bytes);
    ASSERT_GT(measurementDemand().load(), demandBefore) << "the other buckets wait";
    std::vector<bool> timed;
    for (int i = 0; i < 160; ++i) {
      timed.push_back(measurementWanted());
      sim.step(m, 1 << 17);
    }
    if (getenv("ICN_TEST_VERBOSE"))
      for (size_t i = 0; i < timed.size(); ++i)
        fprintf(stderr, "%c%s", timed[i] ? 'T' : '.', i + 1 == timed.size() ? "\n" : "");
    // Untimed runs alternate 3 (a block's first calls; fewer in the first, whose first calls were asked for before
    // the duel began) and 7 (inside the span).
    std::vector<int> runs;
    int run = 0;
    for (size_t i = 1; i < timed.size(); ++i) {
      if (!timed[i]) {
        ++run;
      } else if (run > 0) {
        runs.push_back(run);
        run = 0;
      }
    }
    ASSERT_FALSE(runs.empty());
    EXPECT_LE(runs[0], 3);
    runs[0] = 3;
    int spans = static_cast<int>(std::count(runs.begin(), runs.end(), 7));
    EXPECT_GE(spans, 2) << "every block of the duel ran its span untimed";
    EXPECT_EQ(static_cast<int>(std::count(runs.begin(), runs.end(), 3)), spans);
    EXPECT_EQ(runs.size(), 2 * static_cast<size_t>(spans)) << "no other untimed calls";
  }
  EXPECT_EQ(measurementDemand().load(), demandBefore);
  EXPECT_FALSE(measurementWanted());
}

namespace {
std::vector<std::string> g_captured;
void captureLog(int, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_captured.emplace_back(buf);
}
}  // namespace

TEST(Group, QuietBlocksCutByOtherSizesRunAgain) {
  // nccl-tests and the paired benchmark visit each size for a few dozen calls at a time: a duel that begins late
  // in a visit has a block cut by the next size's calls (NCCL's sequence numbers then void its span). The block's
  // arm runs again, and the duel still ranks spans instead of ending on "not enough measurements".
  Model m = net128KiB();
  GroupConfig cfg = onlineCfg();
  cfg.explore.quietDuelCalls = 12;
  g_captured.clear();
  icn::setLogSink(captureLog);
  uint32_t reran = 0, spanRanked = 0, treeSimple = 0;
  const uint32_t seeds = testSeeds();
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    Sim sim(2, 2, cfg, seed * 7 + 3, 6, 0, 2);
    sim.table = ringLlFirstTable;
    size_t before = g_captured.size();
    // 128 KiB's visits: 30 calls (its duel begins near their end), then 40 at a time, 8 MiB's between.
    for (int visit = 0; visit < 5; ++visit) {
      for (int i = 0; i < (visit == 0 ? 30 : 40); ++i) sim.step(m, 1 << 17);
      for (int i = 0; i < 40; ++i) sim.step(m, 1 << 23);
    }
    bool cut = false, ranked = false;
    for (size_t i = before; i < g_captured.size(); ++i) {
      const std::string& l = g_captured[i];
      if (l.find("2^17 B duel: other sizes' calls came inside a quiet block") != std::string::npos) cut = true;
      if (l.find("2^17 B duel:") != std::string::npos && l.find("spans)") != std::string::npos) ranked = true;
    }
    reran += cut;
    spanRanked += ranked;
    Decision d = sim.current(1 << 17);
    treeSimple += d.algo == 0 && d.proto == 2;
  }
  icn::setLogSink(nullptr);
  EXPECT_GE(reran, seeds * 9 / 10) << "the duel began late in the first visit and was cut";
  EXPECT_GE(spanRanked, seeds * 9 / 10) << "and still ranked spans";
  EXPECT_GE(treeSimple, seeds * 8 / 10) << "Tree/Simple, the fastest untimed";
}
