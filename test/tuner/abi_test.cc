// Plays NCCL's part against the built plugin through the C ABI: tuner v5 + profiler v5 from one dlopen'ed .so,
// two ranks of one communicator in one process (like nccl-tests -g 2).
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "abi/profiler_v5.h"
#include "abi/tuner_v2.h"
#include "abi/tuner_v4.h"
#include "abi/tuner_v5.h"
#include "leak_check.h"
#include "nccl_log.h"
#include "nccl_pick.h"
#include "core/json.h"

namespace {

using icn::testing::clearNcclLog;
using icn::testing::ncclLogged;
using icn::testing::ncclLogger;
using icn::testing::ncclLogLines;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each test gets a fresh copy of the library, so its settings (read once per process image) start clean.
struct Plugin {
  void* lib = nullptr;
  std::string path;
  const ncclTuner_v5_t* tuner = nullptr;
  const ncclProfiler_v5_t* prof = nullptr;
  explicit Plugin(const char* tag) {
    path = "/tmp/icn-abi-" + std::to_string(getpid()) + "-" + tag + ".so";
    std::ifstream src(ICN_PLUGIN_PATH, std::ios::binary);
    std::ofstream dst(path, std::ios::binary);
    dst << src.rdbuf();
    dst.close();
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | icn::test::kKeepImageForLeakCheck);
    if (!lib) return;
    tuner = static_cast<const ncclTuner_v5_t*>(dlsym(lib, "ncclTunerPlugin_v5"));
    prof = static_cast<const ncclProfiler_v5_t*>(dlsym(lib, "ncclProfiler_v5"));
  }
  ~Plugin() {
    if (lib) dlclose(lib);
    unlink(path.c_str());
  }
};

// Synthetic GPU, any size, 2 ranks: Ring/LL128 is fastest. NCCL's model (realisticTable) picks Ring/LL128 at
// 1 MiB and Ring/Simple at 4 MiB.
double gpuMicros(int algo, int proto, int channels) {
  static const double t[2][3] = {{60, 41, 37}, {48, 23.8, 29.7}};
  double us = t[algo][proto];
  return channels < 8 ? us * 1.1 : us;
}

struct Rank {
  void* tctx = nullptr;
  void* pctx = nullptr;
  std::vector<std::pair<int, int>> picks;
  uint64_t ncclSeq = 0;  // NCCL's comm->seqNumber[AllReduce]: counts every collective, timed or not
};

const char* kAlgoNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
const char* kProtoNames[] = {"LL", "LL128", "SIMPLE"};

// One all-reduce on one rank, the way NCCL 2.28 drives tuner and profiler. With `deferred`, the channels' stops
// are queued there instead of reported at once (the caller reports them later, in any order).
void collective(const Plugin& p, Rank& r, int* mask, uint64_t* gpuClock, size_t bytes,
                std::vector<std::function<void()>>* deferred = nullptr) {
  int active = __atomic_load_n(mask, __ATOMIC_RELAXED);  // NCCL samples the mask when the task is enqueued
  float table[7][3];
  realisticTable(&table[0][0], static_cast<double>(bytes));
  int nChannels = 0;
  ASSERT_EQ(p.tuner->getCollInfo(r.tctx, ncclFuncAllReduce, bytes, 1, reinterpret_cast<float**>(table), 7, 3, 0,
                                 &nChannels),
            ncclSuccess);
  auto pick = ncclPick(&table[0][0]);
  ASSERT_GE(pick.first, 0);
  ASSERT_LE(pick.first, 1) << "only Tree/Ring are supported in this table";
  r.picks.push_back(pick);
  int channels = nChannels > 0 ? std::min(nChannels, 16) : 8;
  uint64_t start = *gpuClock;
  uint64_t dur = static_cast<uint64_t>(gpuMicros(pick.first, pick.second, channels) * 1000);
  *gpuClock += dur + 1000;  // the GPU runs the call, timed or not
  uint64_t seq = r.ncclSeq++;
  if (!(active & ncclProfileColl)) return;
  ncclProfilerEventDescr_v5_t d{};
  d.type = ncclProfileColl;
  d.coll.seqNumber = seq;
  d.coll.func = "AllReduce";
  d.coll.count = bytes / 4;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = static_cast<uint8_t>(channels);
  d.coll.algo = kAlgoNames[pick.first];
  d.coll.proto = kProtoNames[pick.second];
  void* coll = nullptr;
  ASSERT_EQ(p.prof->startEvent(r.pctx, &coll, &d), ncclSuccess);
  ASSERT_NE(coll, nullptr);
  ASSERT_EQ(p.prof->stopEvent(coll), ncclSuccess);  // "enqueued"
  if (!(active & ncclProfileKernelCh)) return;
  std::vector<void*> chs;
  for (int c = 0; c < channels; ++c) {
    ncclProfilerEventDescr_v5_t k{};
    k.type = ncclProfileKernelCh;
    k.parentObj = coll;
    k.kernelCh.channelId = static_cast<uint8_t>(c);
    k.kernelCh.pTimer = start + c * 10;
    void* h = nullptr;
    ASSERT_EQ(p.prof->startEvent(r.pctx, &h, &k), ncclSuccess);
    ASSERT_NE(h, nullptr);
    chs.push_back(h);
  }
  auto stops = [&p, chs, start, dur, channels] {
    for (int c = channels - 1; c >= 0; --c) {  // stops in reverse order
      ncclProfilerEventStateArgs_v5_t a{};
      a.kernelCh.pTimer = start + dur - (channels - 1 - c) * 5;
      ASSERT_EQ(p.prof->recordEventState(chs[c], ncclProfilerKernelChStop, &a), ncclSuccess);
      ASSERT_EQ(p.prof->stopEvent(chs[c]), ncclSuccess);
    }
  };
  if (deferred)
    deferred->push_back(stops);
  else
    stops();
}

// Both ranks' profiler and tuner, each rank's profiler first (NCCL's order within a communicator).
void initRanks(const Plugin& p, Rank (&ranks)[2], uint64_t commId, int* mask) {
  ncclNvlDomainInfo_v5_t nvl{1, 2, 2};
  ncclTunerConstants_v5_t constants{};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(p.prof->init(&ranks[r].pctx, commId, mask, "abi", 1, 2, r, ncclLogger), ncclSuccess);
    ASSERT_EQ(p.tuner->init(&ranks[r].tctx, commId, 2, 1, ncclLogger, &nvl, &constants), ncclSuccess);
  }
}

// The plugin's defaults: no cache, heatmap file, tuner mode or user choice left by an earlier test; 2 screening calls.
void defaultTunerEnv() {
  unsetenv("ICN_TUNER_CACHE");
  unsetenv("ICN_HEATMAP_FILE");
  unsetenv("ICN_TUNER");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  setenv("ICN_TUNER_EXPLORE_CALLS", "2", 1);
}

struct Env {
  std::string cache = "/tmp/icn-abi-cache-" + std::to_string(getpid()) + ".csv";
  // The default snapshot path (XDG_RUNTIME_DIR is the test's own directory, see FreshUserDirs).
  std::string heat = std::string(getenv("XDG_RUNTIME_DIR")) + "/icn/heatmap-" + std::to_string(getpid()) + ".json";
  std::string heatExplicit = "/tmp/icn-abi-heat-" + std::to_string(getpid()) + ".json";
};

// Persistence is on by default: every test gets empty per-user cache and runtime directories, so no test replays
// a table another one learned (or a developer's own).
class FreshUserDirs : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    for (const char* var : {"XDG_CACHE_HOME", "XDG_RUNTIME_DIR"}) {
      char t[] = "/tmp/icn-abi-xdg-XXXXXX";
      ASSERT_NE(mkdtemp(t), nullptr);
      setenv(var, t, 1);
    }
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    for (const char* var : {"XDG_CACHE_HOME", "XDG_RUNTIME_DIR"})
      if (const char* d = getenv(var)) std::system(("rm -rf '" + std::string(d) + "'").c_str());
  }
};
const bool g_freshDirs = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new FreshUserDirs);
  return true;
}();

// A new empty per-user cache directory, for a case that must not replay what an earlier case of its test learned.
void newCacheHome() {
  char t[] = "/tmp/icn-abi-xdg-XXXXXX";
  ASSERT_NE(mkdtemp(t), nullptr);
  if (const char* old = getenv("XDG_CACHE_HOME")) std::system(("rm -rf '" + std::string(old) + "'").c_str());
  setenv("XDG_CACHE_HOME", t, 1);
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

}  // namespace

TEST(PluginAbi, ExportsAndSizes) {
  Plugin p("exports");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  ASSERT_NE(p.tuner, nullptr);
  ASSERT_NE(p.prof, nullptr);
  EXPECT_STREQ(p.tuner->name, "ICN");
  EXPECT_STREQ(p.prof->name, "ICN");
  for (const char* sym : {"ncclTunerPlugin_v4", "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"})
    EXPECT_NE(dlsym(p.lib, sym), nullptr) << sym;
  EXPECT_EQ(dlsym(p.lib, "_ZN3icn5tuner5GroupD1Ev"), nullptr) << "internal symbols must stay hidden";
}

TEST(PluginAbi, OnlineConvergesThenStaticReplaysTheCache) {
  Env env;
  unlink(env.cache.c_str());
  unlink(env.heat.c_str());
  setenv("ICN_TUNER", "online", 1);
  setenv("ICN_TUNER_CACHE", env.cache.c_str(), 1);
  unsetenv("ICN_HEATMAP_FILE");
  setenv("ICN_HEATMAP_INTERVAL_MS", "20", 1);
  setenv("ICN_TUNER_EXPLORE_CALLS", "2", 1);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  const uint64_t commId = 0x5eed1234abcdULL;
  const size_t bytes = 1 << 20;
  {
    Plugin p("online");
    ASSERT_NE(p.lib, nullptr) << dlerror();
    int mask = 0;
    uint64_t clock = 1'000'000;
    Rank ranks[2];
    for (int r = 0; r < 2; ++r)
      ASSERT_EQ(p.prof->init(&ranks[r].pctx, commId, &mask, "abi", 1, 2, r, ncclLogger), ncclSuccess);
    ncclNvlDomainInfo_v5_t nvl{1, 2, 2};
    ncclTunerConstants_v5_t constants{};
    for (int r = 0; r < 2; ++r)
      ASSERT_EQ(p.tuner->init(&ranks[r].tctx, commId, 2, 1, ncclLogger, &nvl, &constants), ncclSuccess);
    bool maskWasOn = false;
    for (int it = 0; it < 120; ++it)
      for (Rank& r : ranks) {
        maskWasOn |= (mask & (ncclProfileColl | ncclProfileKernelCh)) == (ncclProfileColl | ncclProfileKernelCh);
        collective(p, r, &mask, &clock, bytes);
      }
    EXPECT_TRUE(maskWasOn) << "the profiler must ask NCCL for Coll + KernelCh events while exploring";
    EXPECT_EQ(mask, 0) << "profiling must stop once every bucket has settled";
    EXPECT_EQ(ranks[0].picks, ranks[1].picks) << "both ranks must make the same choice for every call";
    EXPECT_EQ(ranks[0].picks.back(), std::make_pair(1, 1)) << "converges to the measured fastest (Ring/LL128)";
    std::set<std::pair<int, int>> tried(ranks[0].picks.begin(), ranks[0].picks.end());
    EXPECT_EQ(tried.size(), 6u) << "every supported algorithm/protocol pair was measured";
    EXPECT_TRUE(ncclLogged("RING/LL128", NCCL_TUNING)) << "decision changes are logged under TUNING";
    if (getenv("ICN_TEST_VERBOSE"))
      for (auto& l : ncclLogLines()) printf("%d:%lu:%s\n", l.level, l.flags, l.text.c_str());
    // The live snapshot (rewritten every 20 ms here) shows both ranks' Ring/LL128 calls.
    icn::json::Value v;
    std::string why, heat;
    for (int i = 0; i < 200; ++i, usleep(10000)) {
      heat = slurp(env.heat);
      if (heat.find("\"proto\":\"LL128\",\"channels\":8,\"count\":" ) != std::string::npos &&
          icn::json::parse(heat, v, why) && v.get("comms") && v.get("comms")->arr.size() == 2)
        break;
    }
    struct stat st {};
    ASSERT_EQ(lstat(env.heat.c_str(), &st), 0) << env.heat;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the snapshot is private to its user";
    for (Rank& r : ranks) EXPECT_EQ(p.tuner->finalize(r.tctx), ncclSuccess);
    for (Rank& r : ranks) EXPECT_EQ(p.prof->finalize(r.pctx), ncclSuccess);
    EXPECT_NE(access(env.heat.c_str(), F_OK), 0) << "the default snapshot is removed with the last communicator";

    std::string cache = slurp(env.cache);
    EXPECT_NE(cache.find("AllReduce,2,1,20,RING,LL128,0,"), std::string::npos) << cache;

    ASSERT_TRUE(icn::json::parse(heat, v, why)) << why;
    ASSERT_NE(v.get("comms"), nullptr);
    int withRingLL128 = 0;
    for (const auto& c : v.get("comms")->arr)
      for (const auto& k : c.get("collectives")->arr)
        if (k.string("algo", "") == "RING" && k.string("proto", "") == "LL128" && k.number("channels", 0) == 8) {
          ++withRingLL128;
          EXPECT_NEAR(k.number("p50_us", 0), 23.8, 0.1);
          EXPECT_EQ(k.number("bucket_log2", 0), 20);
        }
    EXPECT_EQ(withRingLL128, 2) << "one heatmap entry per rank: " << heat;
  }
  // Second run: the persisted table, no exploration. An explicit heatmap file asks for continuous measurement.
  setenv("ICN_TUNER", "static", 1);
  setenv("ICN_HEATMAP_FILE", env.heatExplicit.c_str(), 1);
  {
    Plugin p("static");
    ASSERT_NE(p.lib, nullptr) << dlerror();
    int mask = 0;
    uint64_t clock = 0;
    Rank ranks[2];
    ASSERT_NO_FATAL_FAILURE(initRanks(p, ranks, commId, &mask));
    for (int it = 0; it < 30; ++it)
      for (Rank& r : ranks) {
        collective(p, r, &mask, &clock, bytes);
        EXPECT_EQ(r.picks.back(), std::make_pair(1, 1)) << "call " << it;
        EXPECT_NE(mask & ncclProfileKernelCh, 0) << "an explicit ICN_HEATMAP_FILE keeps timing on";
      }
    for (Rank& r : ranks) {
      p.tuner->finalize(r.tctx);
      p.prof->finalize(r.pctx);
    }
    EXPECT_NE(slurp(env.heatExplicit).find("\"proto\":\"LL128\""), std::string::npos);
  }
  unsetenv("ICN_TUNER");
  unsetenv("ICN_TUNER_CACHE");
  unsetenv("ICN_HEATMAP_FILE");
  unlink(env.cache.c_str());
  unlink(env.heat.c_str());
  unlink(env.heatExplicit.c_str());
}

// Two ranks in one process, `calls` all-reduces of 1 MiB each; returns rank 0's picks.
std::vector<std::pair<int, int>> runTwoRanks(const char* tag, ncclNvlDomainInfo_v5_t nvl, int calls) {
  Plugin p(tag);
  EXPECT_NE(p.lib, nullptr) << dlerror();
  if (!p.lib) return {};
  int mask = 0;
  uint64_t clock = 1'000'000;
  Rank ranks[2];
  ncclTunerConstants_v5_t constants{};
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(p.prof->init(&ranks[r].pctx, 0xfeed, &mask, "abi", 1, 2, r, ncclLogger), ncclSuccess);
    EXPECT_EQ(p.tuner->init(&ranks[r].tctx, 0xfeed, 2, 1, ncclLogger, &nvl, &constants), ncclSuccess);
  }
  for (int it = 0; it < calls; ++it)
    for (Rank& r : ranks) collective(p, r, &mask, &clock, 1 << 20);
  for (Rank& r : ranks) p.tuner->finalize(r.tctx);
  for (Rank& r : ranks) p.prof->finalize(r.pctx);
  EXPECT_EQ(ranks[0].picks, ranks[1].picks);
  return ranks[0].picks;
}

// Without ICN_TUNER_CACHE the learned table goes to the per-user cache directory, in a private file named by the
// key of machine, NCCL version and communicator shape; the next job of that shape replays it, a job of another
// shape does not.
TEST(PluginAbi, LearnedTableIsPersistedByDefaultUnderItsKey) {
  defaultTunerEnv();
  const std::string dir = std::string(getenv("XDG_CACHE_HOME")) + "/icn";
  auto first = runTwoRanks("persist1", ncclNvlDomainInfo_v5_t{1, 2, 2}, 120);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.back(), std::make_pair(1, 1)) << "learns Ring/LL128";
  struct stat st {};
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto files = listDir(dir);
  ASSERT_EQ(files.size(), 1u) << "one table, no temporary file left";
  EXPECT_EQ(files[0].rfind("tuner-", 0), 0u) << files[0];
  ASSERT_EQ(lstat((dir + "/" + files[0]).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string table = slurp(dir + "/" + files[0]);
  EXPECT_NE(table.find("# key: icn-tuner-key v1 "), std::string::npos) << table;
  EXPECT_NE(table.find("nRanks=2 nNodes=1 perNode=2 nvl=1:2:2"), std::string::npos) << table;
  EXPECT_NE(table.find("AllReduce,2,1,20,RING,LL128,0,"), std::string::npos) << table;

  auto again = runTwoRanks("persist2", ncclNvlDomainInfo_v5_t{1, 2, 2}, 10);
  std::set<std::pair<int, int>> tried(again.begin(), again.end());
  EXPECT_EQ(tried, (std::set<std::pair<int, int>>{{1, 1}})) << "the same shape replays its table from the start";

  // Another shape (two NVLink domains of one rank each): a stale table is not reused; it learns its own.
  auto other = runTwoRanks("persist3", ncclNvlDomainInfo_v5_t{2, 1, 1}, 120);
  std::set<std::pair<int, int>> triedOther(other.begin(), other.end());
  EXPECT_GT(triedOther.size(), 1u) << "explores";
  EXPECT_EQ(listDir(dir).size(), 2u);
}

// The proxy may report a call's last channel stop before its predecessor's. Here every second call's stops come
// first: pairing a completion only with the one reported just before it finds no period at all, so the round ends
// on "not enough measurements" with NCCL's choice (Ring/Simple); pairing by sequence number measures every call.
TEST(PluginAbi, ReorderedCompletionsStillMeasure) {
  setenv("ICN_TUNER", "online", 1);
  unsetenv("ICN_TUNER_CACHE");
  unsetenv("ICN_HEATMAP_FILE");
  setenv("ICN_TUNER_EXPLORE_CALLS", "2", 1);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  clearNcclLog();
  Plugin p("reorder");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  const uint64_t commId = 0x5eed4321dcbaULL;
  int mask = 0;
  uint64_t clock[2] = {1'000'000, 1'000'000};
  Rank ranks[2];
  ASSERT_NO_FATAL_FAILURE(initRanks(p, ranks, commId, &mask));
  for (int it = 0; it < 100; ++it)
    for (int r = 0; r < 2; ++r) {
      std::vector<std::function<void()>> stops;
      collective(p, ranks[r], &mask, &clock[r], 4 << 20, &stops);
      collective(p, ranks[r], &mask, &clock[r], 4 << 20, &stops);
      for (auto it2 = stops.rbegin(); it2 != stops.rend(); ++it2) (*it2)();
    }
  EXPECT_EQ(ranks[0].picks, ranks[1].picks);
  EXPECT_EQ(ranks[0].picks.front(), std::make_pair(1, 2)) << "NCCL's own choice at 4 MiB: Ring/Simple";
  EXPECT_EQ(ranks[0].picks.back(), std::make_pair(1, 1)) << "converges to the measured fastest (Ring/LL128)";
  EXPECT_FALSE(ncclLogged("not enough measurements", NCCL_TUNING));
  for (Rank& r : ranks) {
    EXPECT_EQ(p.tuner->finalize(r.tctx), ncclSuccess);
    EXPECT_EQ(p.prof->finalize(r.pctx), ncclSuccess);
  }
  // The profiler's finalize line counts the periods of calls reported before their predecessor.
  int reordered = 0;
  for (const auto& line : ncclLogLines()) {
    const std::string& l = line.text;
    size_t at = l.find(" completed after their successor");
    if (at == std::string::npos) continue;
    size_t open = l.find_last_of("(,", at);  // "(N spans over untimed calls, M completed after their successor)"
    reordered += std::stoi(l.substr(open + 1, at - open - 1));
  }
  EXPECT_GE(reordered, 10) << "half the calls timed while exploring were reported before their predecessor";
  unsetenv("ICN_TUNER");
}

// A duel through the C ABI: NCCL's event mask is off for the calls inside each block (NCCL samples it as a call is
// enqueued), the profiler pairs the blocks' timed calls by NCCL's sequence numbers, and the duel ranks the spans.
// 4 MiB: NCCL's Ring/Simple against the screen's Ring/LL128, which NCCL's choice always duels. Quiet duels are for
// communicators spanning nodes (NCCL counts the net path of one host as two nodes); one node times every call.
TEST(PluginAbi, QuietDuelTimesOnlyTheEndsOfItsBlocks) {
  defaultTunerEnv();
  struct Case {
    const char* quiet;  // ICN_TUNER_QUIET_DUEL
    int nNodes;
    bool heatmap;  // an explicit ICN_HEATMAP_FILE: every collective timed
    bool spans;
  };
  const std::string heat = "/tmp/icn-abi-quiet-heat-" + std::to_string(getpid()) + ".json";
  for (const Case& k : {Case{"12", 2, false, true}, Case{"0", 2, false, false}, Case{"12", 1, false, false},
                        Case{"12", 2, true, false}}) {
    SCOPED_TRACE(std::string("ICN_TUNER_QUIET_DUEL=") + k.quiet + " nNodes=" + std::to_string(k.nNodes) +
                 (k.heatmap ? " ICN_HEATMAP_FILE set" : ""));
    newCacheHome();
    setenv("ICN_TUNER_QUIET_DUEL", k.quiet, 1);
    if (k.heatmap)
      setenv("ICN_HEATMAP_FILE", heat.c_str(), 1);
    else
      unsetenv("ICN_HEATMAP_FILE");
    clearNcclLog();
    Plugin p((std::string("quiet") + k.quiet + "-" + std::to_string(k.nNodes) + (k.heatmap ? "-heat" : "")).c_str());
    ASSERT_NE(p.lib, nullptr) << dlerror();
    int mask = 0;
    uint64_t clock[2] = {1'000'000, 1'000'000};
    Rank ranks[2];
    const uint64_t commId = 0x9e1e7000ULL + static_cast<uint64_t>(k.nNodes) * 16 + (k.spans ? 1 : 0) + (k.heatmap ? 2 : 0);
    ncclNvlDomainInfo_v5_t nvl{1, 2, 2};
    ncclTunerConstants_v5_t constants{};
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(p.prof->init(&ranks[r].pctx, commId, &mask, "abi", k.nNodes, 2, r, ncclLogger), ncclSuccess);
      ASSERT_EQ(p.tuner->init(&ranks[r].tctx, commId, 2, k.nNodes, ncclLogger, &nvl, &constants), ncclSuccess);
    }
    std::vector<bool> timed;
    for (int it = 0; it < 160; ++it) {
      timed.push_back(mask != 0);
      for (int r = 0; r < 2; ++r) collective(p, ranks[r], &mask, &clock[r], 4 << 20);
    }
    EXPECT_EQ(ranks[0].picks, ranks[1].picks);
    EXPECT_EQ(ranks[0].picks.back(), std::make_pair(1, 1)) << "Ring/LL128";
    EXPECT_TRUE(ncclLogged("duel: RING/LL128 stays RING/LL128", NCCL_TUNING));
    // Untimed runs between the first and the last timed call: the duel's blocks, 12 calls timed at the 4th
    // (before the span) and the last: 3 untimed, then 7.
    size_t first = 0, last = timed.size() - 1;
    while (first < last && !timed[first]) ++first;
    while (last > first && !timed[last]) --last;
    std::vector<int> runs;
    int run = 0;
    for (size_t i = first; i <= last; ++i) {
      if (!timed[i]) {
        ++run;
      } else if (run > 0) {
        runs.push_back(run);
        run = 0;
      }
    }
    for (Rank& r : ranks) {
      EXPECT_EQ(p.tuner->finalize(r.tctx), ncclSuccess);
      EXPECT_EQ(p.prof->finalize(r.pctx), ncclSuccess);
    }
    int spans = 0;
    for (const auto& line : ncclLogLines())
      if (size_t at = line.text.find(" spans over untimed calls"); at != std::string::npos)
        spans += std::stoi(line.text.substr(line.text.rfind('(', at) + 1));
    if (getenv("ICN_TEST_VERBOSE"))
      for (auto& l : ncclLogLines()) printf("%d:%lu:%s\n", l.level, l.flags, l.text.c_str());
    if (k.spans) {
      // The first block's first call was asked for before the duel began: timed, and its first run is 2.
      EXPECT_EQ(runs, (std::vector<int>{2, 7, 3, 7})) << "one block per arm";
      EXPECT_GE(spans, 4) << "a span per block and rank (the profiler also pairs the first block's 1st and 4th)";
      EXPECT_TRUE(ncclLogged("(2 spans)", NCCL_TUNING)) << "the duel ranked spans";
    } else {
      EXPECT_TRUE(runs.empty()) << "every call of the exploration timed";
      if (k.heatmap) {
        EXPECT_NE(mask, 0) << "the explicit heatmap keeps timing on";
      }
      EXPECT_EQ(spans, 0);
      EXPECT_FALSE(ncclLogged("spans)", NCCL_TUNING));
    }
  }
  unsetenv("ICN_TUNER_QUIET_DUEL");
  unsetenv("ICN_HEATMAP_FILE");
  unlink(heat.c_str());
}

// ICN_TUNER and ICN_TUNER_CACHE are read at each communicator's init, so one process can hold NCCL's own choice
// next to an online communicator (the paired device benchmark relies on it), and the online one's profiling, which
// NCCL switches on process-wide, must not move the other's decisions.
TEST(PluginAbi, TunerModeIsPerCommunicator) {
  unsetenv("ICN_TUNER_CACHE");
  unsetenv("ICN_HEATMAP_FILE");
  setenv("ICN_TUNER_EXPLORE_CALLS", "2", 1);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  Plugin p("percomm");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  int mask = 0;
  // One timeline per rank and communicator: the other communicator's calls are no part of a period.
  uint64_t offClock[2] = {1'000'000, 1'000'000}, onlineClock[2] = {1'000'000, 1'000'000};
  Rank off[2], online[2];
  setenv("ICN_TUNER", "off", 1);
  ASSERT_NO_FATAL_FAILURE(initRanks(p, off, 0x0ff0ff0ff0ULL, &mask));
  setenv("ICN_TUNER", "online", 1);
  ASSERT_NO_FATAL_FAILURE(initRanks(p, online, 0x0a0a0a0a0aULL, &mask));
  unsetenv("ICN_TUNER");
  bool maskWasOn = false;
  for (int it = 0; it < 100; ++it)
    for (int r = 0; r < 2; ++r) {
      collective(p, off[r], &mask, &offClock[r], 4 << 20);
      maskWasOn |= (mask & ncclProfileKernelCh) != 0;
      collective(p, online[r], &mask, &onlineClock[r], 4 << 20);
    }
  EXPECT_TRUE(maskWasOn);
  for (const auto& pick : off[0].picks) ASSERT_EQ(pick, std::make_pair(1, 2)) << "ICN_TUNER=off keeps NCCL's Ring/Simple";
  EXPECT_EQ(online[0].picks.back(), std::make_pair(1, 1)) << "the online communicator converges to Ring/LL128";
  for (Rank* rs : {off, online})
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(p.tuner->finalize(rs[r].tctx), ncclSuccess);
      EXPECT_EQ(p.prof->finalize(rs[r].pctx), ncclSuccess);
    }
}

TEST(PluginAbi, ModelSkipIsLoggedAndCanBeTurnedOff) {
  // 512 MiB, nothing measured before: NCCL's model (realisticTable) puts both LL arms over 1.5x its choice, so
  // they are not screened and the log says why; ICN_TUNER_MODEL_SKIP=0 screens them; a bad value warns and
  // keeps the default.
  defaultTunerEnv();
  struct Case {
    const char* value;
    bool llScreened;
  };
  for (Case c : {Case{nullptr, false}, Case{"0", true}, Case{"fast", false}}) {
    newCacheHome();
    if (c.value)
      setenv("ICN_TUNER_MODEL_SKIP", c.value, 1);
    else
      unsetenv("ICN_TUNER_MODEL_SKIP");
    clearNcclLog();
    Plugin p(c.value ? c.value : "skipdefault");
    ASSERT_NE(p.lib, nullptr) << dlerror();
    int mask = 0;
    uint64_t clock[2] = {1'000'000, 1'000'000};
    Rank ranks[2];
    ASSERT_NO_FATAL_FAILURE(initRanks(p, ranks, 0x5C1B0000ULL + (c.value ? c.value[0] : 1), &mask));
    for (int it = 0; it < 60; ++it)
      for (int r = 0; r < 2; ++r) collective(p, ranks[r], &mask, &clock[r], size_t{512} << 20);
    int ll = 0;
    for (const auto& pick : ranks[0].picks) ll += pick.second == 0;
    const char* v = c.value ? c.value : "(unset)";
    if (c.llScreened) {
      EXPECT_GE(ll, 2) << "ICN_TUNER_MODEL_SKIP=" << v;
      EXPECT_FALSE(ncclLogged("NCCL's model puts them")) << v;
    } else {
      EXPECT_EQ(ll, 0) << "ICN_TUNER_MODEL_SKIP=" << v;
      EXPECT_TRUE(ncclLogged("2 LL skipped: NCCL's model puts them over 1.5x its choice (", 0x40)) << v;
      EXPECT_TRUE(ncclLogged("RING/LL 7.")) << v;  // realisticTable: Ring/LL 7.x times Ring/Simple at 512 MiB
    }
    EXPECT_EQ(ncclLogged("ICN_TUNER_MODEL_SKIP=fast is not 0 or a ratio"), std::string(v) == "fast");
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(p.tuner->finalize(ranks[r].tctx), ncclSuccess);
      EXPECT_EQ(p.prof->finalize(ranks[r].pctx), ncclSuccess);
    }
  }
  unsetenv("ICN_TUNER_MODEL_SKIP");
}

TEST(PluginAbi, UserAlgoProtoWin) {
  setenv("NCCL_ALGO", "Tree", 1);
  {
    Plugin p("userenv");
    ASSERT_NE(p.lib, nullptr) << dlerror();
    void* ctx = nullptr;
    ncclNvlDomainInfo_v5_t nvl{1, 2, 2};
    ncclTunerConstants_v5_t constants{};
    ASSERT_EQ(p.tuner->init(&ctx, 0x77, 2, 1, ncclLogger, &nvl, &constants), ncclSuccess);
    float table[7][3], before[7][3];
    realisticTable(&table[0][0], 4096);
    std::copy(&table[0][0], &table[0][0] + 21, &before[0][0]);
    int nChannels = 0;
    for (int i = 0; i < 100; ++i)
      ASSERT_EQ(p.tuner->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, reinterpret_cast<float**>(table), 7, 3, 0,
                                     &nChannels),
                ncclSuccess);
    EXPECT_EQ(0, memcmp(table, before, sizeof table));
    EXPECT_EQ(nChannels, 0);
    EXPECT_TRUE(ncclLogged("stands aside"));
    p.tuner->finalize(ctx);
  }
  unsetenv("NCCL_ALGO");
}

TEST(PluginAbi, RulesFileDrivesV5AndV2) {
  std::string rules = "/tmp/icn-abi-rules-" + std::to_string(getpid()) + ".csv";
  {
    std::ofstream f(rules);
    f << "# small all-reduce on Tree/LL with 2 channels\nallreduce,0,65536,tree,ll,2,-1,-1\n";
  }
  setenv("ICN_TUNER_RULES", rules.c_str(), 1);
  setenv("ICN_TUNER", "static", 1);
  {
    Plugin p("rules");
    ASSERT_NE(p.lib, nullptr) << dlerror();
    void* ctx = nullptr;
    ncclNvlDomainInfo_v5_t nvl{1, 2, 2};
    ncclTunerConstants_v5_t constants{};
    ASSERT_EQ(p.tuner->init(&ctx, 0x88, 2, 1, ncclLogger, &nvl, &constants), ncclSuccess);
    float table[7][3];
    realisticTable(&table[0][0], 1 << 20);  // the model prefers Ring here
    int nChannels = 0;
    ASSERT_EQ(p.tuner->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, reinterpret_cast<float**>(table), 7, 3, 0,
                                   &nChannels),
              ncclSuccess);
    EXPECT_EQ(ncclPick(&table[0][0]), std::make_pair(0, 0));
    EXPECT_EQ(nChannels, 2);
    // Outside the rule's range: untouched.
    realisticTable(&table[0][0], 1 << 20);
    nChannels = 0;
    p.tuner->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, reinterpret_cast<float**>(table), 7, 3, 0, &nChannels);
    EXPECT_EQ(nChannels, 0);
    p.tuner->finalize(ctx);

    auto* v2 = static_cast<const ncclTuner_v2_t*>(dlsym(p.lib, "ncclTunerPlugin_v2"));
    ASSERT_NE(v2, nullptr);
    void* c2 = nullptr;
    ASSERT_EQ(v2->init(2, 1, ncclLogger, &c2), ncclSuccess);
    int algo = -1, proto = -1, ch = 0;
    ASSERT_EQ(v2->getCollInfo(c2, ncclFuncAllReduce, 1024, 0, 0, 1, &algo, &proto, &ch), ncclSuccess);
    EXPECT_EQ(algo, 0);
    EXPECT_EQ(proto, 0);
    EXPECT_EQ(ch, 2);
    v2->destroy(c2);

    auto* v4 = static_cast<const ncclTuner_v4_t*>(dlsym(p.lib, "ncclTunerPlugin_v4"));
    ASSERT_NE(v4, nullptr);
    void* c4 = nullptr;
    ASSERT_EQ(v4->init(2, 1, ncclLogger, &c4), ncclSuccess);
    realisticTable(&table[0][0], 1 << 20);
    ASSERT_EQ(v4->getCollInfo(c4, ncclFuncAllReduce, 100, 1, reinterpret_cast<float**>(table), 7, 3, 0, &ch),
              ncclSuccess);
    EXPECT_EQ(ncclPick(&table[0][0]), std::make_pair(0, 0));
    v4->destroy(c4);
  }
  unsetenv("ICN_TUNER_RULES");
  unsetenv("ICN_TUNER");
  unlink(rules.c_str());
}

TEST(PluginAbi, BadRulesFileIsReportedNotFatal) {
  std::string rules = "/tmp/icn-abi-badrules-" + std::to_string(getpid()) + ".csv";
  {
    std::ofstream f(rules);
    f << "allreduce,0,65536,tree,lx,2,-1,-1\n";
  }
  setenv("ICN_TUNER_RULES", rules.c_str(), 1);
  {
    Plugin p("badrules");
    ASSERT_NE(p.lib, nullptr) << dlerror();
    void* ctx = nullptr;
    ASSERT_EQ(p.tuner->init(&ctx, 0x99, 2, 1, ncclLogger, nullptr, nullptr), ncclSuccess);
    EXPECT_TRUE(ncclLogged(rules + ":1: field 5 (proto)"));
    p.tuner->finalize(ctx);
  }
  unsetenv("ICN_TUNER_RULES");
  unlink(rules.c_str());
}
