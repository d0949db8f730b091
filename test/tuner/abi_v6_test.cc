// NCCL 2.29/2.30's view of the plugin: ncclTunerPlugin_v6 and ncclProfiler_v6 driven the way NCCL drives them
// (tuner choice, Coll start/stop, KernelCh events with GPU timestamps), and the Prometheus textfile that results,
// parsed by prometheus_client's text-format parser (prom_check.py).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "abi/profiler_v6.h"
#include "abi/tuner_v5.h"
#include "abi/tuner_v6.h"
#include "nccl_log.h"
#include "nccl_pick.h"

namespace {

using icn::testing::ncclLogged;
using icn::testing::ncclLogger;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A private copy of the library per test: settings are read once per loaded image.
struct Plugin {
  void* lib = nullptr;
  std::string path;
  const ncclTuner_v6_t* tuner = nullptr;
  const ncclProfiler_v6_t* prof = nullptr;
  explicit Plugin(const char* tag) {
    path = "/tmp/icn-abi6-" + std::to_string(getpid()) + "-" + tag + ".so";
    std::filesystem::copy_file(ICN_PLUGIN_PATH, path, std::filesystem::copy_options::overwrite_existing);
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    tuner = static_cast<const ncclTuner_v6_t*>(dlsym(lib, "ncclTunerPlugin_v6"));
    prof = static_cast<const ncclProfiler_v6_t*>(dlsym(lib, "ncclProfiler_v6"));
  }
  ~Plugin() {
    if (lib) dlclose(lib);
    unlink(path.c_str());
  }
};

struct Scratch {
  std::string dir;
  Scratch() {
    char t[] = "/tmp/icn-prom-test-XXXXXX";
    dir = mkdtemp(t);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
};

const char* kAlgo[] = {"TREE", "RING"};
const char* kProto[] = {"LL", "LL128", "SIMPLE"};
const char* kInspectorAlgo[] = {"Tree", "Ring"};
const char* kInspectorProto[] = {"LL", "LL128", "Simple"};

// GPU time of the synthetic machine, by choice and size.
uint64_t gpuNs(int algo, int proto, size_t bytes) {
  return 5000 + 1000 * (algo * 3 + proto) + bytes / 50;  // 5-10 us + 20 GB/s
}

struct Expect {
  uint64_t count = 0;
  double sumUs = 0, sumLogBw = 0;
};
// (collective, message_size label, algo_proto label) -> what was timed
using Expected = std::map<std::tuple<std::string, std::string, std::string>, Expect>;

// One collective on one rank as NCCL 2.30 runs it: getCollInfo, then Coll and KernelCh profiler events.
void collective(const Plugin& p, void* tctx, void* pctx, int* mask, uint64_t* clock, ncclFunc_t func,
                size_t perRankCount, int nranks, const std::string& sizeLabel, Expected* expected) {
  size_t bytes = perRankCount * 4 * (func == ncclFuncAllGather ? nranks : 1);  // NCCL's nBytes
  float table[7][3];
  realisticTable(&table[0][0], static_cast<double>(bytes));
  int nChannels = 0;
  ASSERT_EQ(p.tuner->getCollInfo(tctx, func, bytes, 1, reinterpret_cast<float**>(table), 7, 3, 0, &nChannels),
            ncclSuccess);
  auto pick = ncclPick(&table[0][0]);
  ASSERT_GE(pick.first, 0);
  ASSERT_LE(pick.first, 1);
  int channels = nChannels > 0 ? std::min(nChannels, 16) : 4;
  uint64_t start = *clock, dur = gpuNs(pick.first, pick.second, bytes);
  *clock += dur + 1000;
  int active = __atomic_load_n(mask, __ATOMIC_RELAXED);
  if (!(active & ncclProfileColl)) return;
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileColl;
  d.coll.func = func == ncclFuncAllGather ? "AllGather" : "AllReduce";
  d.coll.count = perRankCount;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = static_cast<uint8_t>(channels);
  d.coll.algo = kAlgo[pick.first];
  d.coll.proto = kProto[pick.second];
  void* coll = nullptr;
  ASSERT_EQ(p.prof->startEvent(pctx, &coll, &d), ncclSuccess);
  ASSERT_NE(coll, nullptr);
  ASSERT_EQ(p.prof->stopEvent(coll), ncclSuccess);
  if (!(active & ncclProfileKernelCh)) return;
  std::vector<void*> chs;
  for (int c = 0; c < channels; ++c) {
    ncclProfilerEventDescr_v6_t k{};
    k.type = ncclProfileKernelCh;
    k.parentObj = coll;
    k.kernelCh.channelId = static_cast<uint8_t>(c);
    k.kernelCh.pTimer = start + c * 10;
    void* h = nullptr;
    ASSERT_EQ(p.prof->startEvent(pctx, &h, &k), ncclSuccess);
    ASSERT_NE(h, nullptr);
    chs.push_back(h);
  }
  for (int c = 0; c < channels; ++c) {
    ncclProfilerEventStateArgs_v6_t a{};
    a.kernelCh.pTimer = start + dur - c * 5;  // channel 0 ends last: the collective spans [start, start + dur]
    ASSERT_EQ(p.prof->recordEventState(chs[c], ncclProfilerKernelChStop, &a), ncclSuccess);
    ASSERT_EQ(p.prof->stopEvent(chs[c]), ncclSuccess);
  }
  Expect& e = (*expected)[{d.coll.func, sizeLabel,
                           std::string(kInspectorAlgo[pick.first]) + "_" + kInspectorProto[pick.second]}];
  double us = dur / 1000.0;
  e.count++;
  e.sumUs += us;
  e.sumLogBw += std::log(static_cast<double>(bytes) / us);
}

void clearEnv() {
  for (const char* v : {"ICN_TUNER_CACHE", "ICN_HEATMAP_FILE", "ICN_TUNER", "ICN_PROM_DIR", "NCCL_ALGO", "NCCL_PROTO",
                        "SLURM_JOB_ID"})
    unsetenv(v);
}

}  // namespace

TEST(PluginAbiV6, ExportsNewAndOldVersions) {
  Plugin p("exports");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  ASSERT_NE(p.tuner, nullptr);
  ASSERT_NE(p.prof, nullptr);
  EXPECT_STREQ(p.tuner->name, "ICN");
  EXPECT_STREQ(p.prof->name, "ICN");
  EXPECT_NE(p.tuner->init, nullptr);
  EXPECT_NE(p.tuner->getCollInfo, nullptr);
  EXPECT_NE(p.tuner->finalize, nullptr);
  EXPECT_EQ(p.tuner->getChunkSize, nullptr) << "NCCL's chunk size is kept (NULL hook)";
  for (const char* sym : {"ncclTunerPlugin_v5", "ncclProfiler_v5", "ncclNetPlugin_v11", "ncclNetPlugin_v12"})
    EXPECT_NE(dlsym(p.lib, sym), nullptr) << sym;
}

// The v6 init's NVLink domains and NCCL's tuning constants key the learned table, as v5's do: a table learned
// under another machine shape or NCCL build is never replayed.
TEST(PluginAbiV6, InitKeysTheTableByNvlinkDomainsAndConstants) {
  clearEnv();
  Plugin p("key");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  ASSERT_TRUE(p.tuner);
  ncclNvlDomainInfo_v6_t nvl{3, 2, 5};
  ncclTunerConstants_v6_t constants{};
  void* ctx = nullptr;
  ASSERT_EQ(p.tuner->init(&ctx, 0x6e71, 10, 3, ncclLogger, &nvl, &constants), ncclSuccess);
  ASSERT_EQ(p.tuner->finalize(ctx), ncclSuccess);
  std::string key;
  for (const auto& l : icn::testing::ncclLogLines())
    if (l.text.find("table key:") != std::string::npos && l.text.find("nRanks=10 ") != std::string::npos) key = l.text;
  ASSERT_FALSE(key.empty()) << "no table key logged at init";
  EXPECT_NE(key.find("nvl=3:2:5"), std::string::npos) << key;
  EXPECT_EQ(key.find("consts=0000000000000000"), std::string::npos) << "constants not hashed: " << key;
}

// Two ranks of one communicator through the v6 tables with every collective timed (ICN_HEATMAP_FILE) and
// ICN_PROM_DIR set: the file appears while the job runs, is replaced atomically, and says what was timed.
TEST(PluginAbiV6, PrometheusFileParsesAndMatchesWhatRan) {
  clearEnv();
  Scratch s;
  std::string heat = s.dir + "/heat.json";
  setenv("ICN_HEATMAP_FILE", heat.c_str(), 1);
  setenv("ICN_HEATMAP_INTERVAL_MS", "50", 1);
  setenv("ICN_PROM_DIR", s.dir.c_str(), 1);
  setenv("ICN_TUNER_EXPLORE_CALLS", "2", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  Plugin p("prom");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  ASSERT_TRUE(p.tuner && p.prof);

  const uint64_t commId = 0x600dcafe;
  int mask = 0;
  void* tctx[2] = {};
  void* pctx[2] = {};
  ncclNvlDomainInfo_v6_t nvl{1, 2, 2};
  ncclTunerConstants_v6_t constants{};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(p.prof->init(&pctx[r], commId, &mask, "train dp \"0\"", 1, 2, r, ncclLogger), ncclSuccess);
    ASSERT_EQ(p.tuner->init(&tctx[r], commId, 2, 1, ncclLogger, &nvl, &constants), ncclSuccess);
  }
  EXPECT_EQ(mask & (ncclProfileColl | ncclProfileKernelCh), ncclProfileColl | ncclProfileKernelCh);
  EXPECT_EQ(mask & (ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch), 0) << "CE events stay off";

  Expected expected;
  uint64_t clock[2] = {1000000, 1000000};
  for (int i = 0; i < 40; ++i)
    for (int r = 0; r < 2; ++r) {
      // 1 MiB all-reduce (log2 bucket 2^20..2^21: "1-2MB"), 256 KiB per rank all-gather (512 KiB in all: one
      // rank's share of the bucket is 256-512 KiB).
      collective(p, tctx[r], pctx[r], &mask, &clock[r], ncclFuncAllReduce, 262144, 2, "1-2MB", &expected);
      collective(p, tctx[r], pctx[r], &mask, &clock[r], ncclFuncAllGather, 65536, 2, "256-512KB", &expected);
    }
  ASSERT_FALSE(HasFailure());

  // Written by the interval thread while the communicators are alive.
  std::string prom;
  for (int i = 0; i < 200 && prom.empty(); ++i) {
    for (const auto& f : std::filesystem::directory_iterator(s.dir))
      if (f.path().extension() == ".prom") prom = f.path();
    if (prom.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(prom.empty()) << "no .prom file in " << s.dir;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(std::filesystem::path(prom).filename().string(),
            std::string("icn-") + host + "-" + std::to_string(getpid()) + ".prom");
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(p.tuner->finalize(tctx[r]), ncclSuccess);
    ASSERT_EQ(p.prof->finalize(pctx[r]), ncclSuccess);
  }
  struct stat st{};
  ASSERT_EQ(stat(prom.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(s.dir)) {
    (void)f;
    files++;
  }
  EXPECT_EQ(files, 2) << "only heat.json and the .prom file: no temporary file left behind";

  // What ran, for the parser check: mean time and geometric-mean bus bandwidth (2 ranks: all-reduce x1,
  // all-gather x1/2 of its total bytes).
  std::string expPath = s.dir + "/expected.json";
  {
    std::ofstream e(expPath);
    e << "[";
    bool first = true;
    for (const auto& [k, v] : expected) {
      const auto& [coll, size, ap] = k;
      double factor = coll == "AllReduce" ? 1.0 : 0.5;
      double busbw = std::exp(v.sumLogBw / v.count) * 1e-3 * factor;
      e << (first ? "" : ",") << "{\"collective\":\"" << coll << "\",\"message_size\":\"" << size
        << "\",\"algo_proto\":\"" << ap << "\",\"count\":" << v.count << ",\"mean_us\":" << v.sumUs / v.count
        << ",\"busbw_gbs\":" << busbw << "}";
      first = false;
    }
    e << "]";
  }
  ASSERT_GE(expected.size(), 2u);
  std::string cmd = std::string(ICN_PYTHON3) + " " + ICN_PROM_CHECK + " '" + prom + "' '" + expPath + "' " + host +
                    " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) out += buf;
  int rc = pclose(pipe);
  EXPECT_EQ(rc, 0) << out << "\n--- file:\n" << slurp(prom);
  EXPECT_TRUE(ncclLogged("prometheus: metrics to " + prom));
  clearEnv();
  unsetenv("ICN_HEATMAP_INTERVAL_MS");
}

// A directory that cannot be written: one WARN naming it, NCCL's calls still succeed.
TEST(PluginAbiV6, UnwritablePrometheusDirIsAWarningNotAFailure) {
  clearEnv();
  setenv("ICN_PROM_DIR", "/nonexistent/icn-prom", 1);
  setenv("ICN_HEATMAP_INTERVAL_MS", "20", 1);
  Plugin p("promfail");
  ASSERT_NE(p.lib, nullptr) << dlerror();
  int mask = 0;
  void* pctx = nullptr;
  ASSERT_EQ(p.prof->init(&pctx, 0x77, &mask, nullptr, 1, 1, 0, ncclLogger), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(p.prof->finalize(pctx), ncclSuccess);
  EXPECT_TRUE(ncclLogged("prometheus: cannot write /nonexistent/icn-prom/icn-"));
  clearEnv();
  unsetenv("ICN_HEATMAP_INTERVAL_MS");
}
