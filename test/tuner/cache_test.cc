#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "tuner/group.h"
#include "tuner/group_registry.h"
#include "tuner/store/cache.h"
#include "tuner/store/cache_key.h"

using namespace icn;
using namespace icn::tuner;

namespace {
std::string tmpPath(const char* tag) {
  return "/tmp/icn-cache-test-" + std::to_string(getpid()) + "-" + tag + ".csv";
}
}  // namespace

TEST(Cache, RoundTrip) {
  std::string path = tmpPath("rt");
  unlink(path.c_str());
  std::vector<CacheEntry> in = {{coll::kAllReduce, 2, 1, 3, Decision{0, 0, 0}, 13.8, 12},
                                {coll::kAllReduce, 2, 1, 21, Decision{1, 1, 4}, 23.75, 16},
                                {coll::kAllGather, 16, 2, 30, Decision{1, 2, 0}, 1234.5, 3}};
  std::string why;
  ASSERT_EQ(saveCache(path, in, &why), Status::Ok) << why;
  std::vector<CacheEntry> out;
  ASSERT_EQ(loadCache(path, &out, &why), Status::Ok) << why;
  ASSERT_EQ(out.size(), in.size());
  for (const CacheEntry& e : in) {
    auto it = std::find_if(out.begin(), out.end(), [&](const CacheEntry& o) { return o.sameKey(e); });
    ASSERT_NE(it, out.end());
    EXPECT_EQ(it->decision, e.decision);
    EXPECT_NEAR(it->meanUs, e.meanUs, 1e-3);
    EXPECT_EQ(it->samples, e.samples);
  }
  unlink(path.c_str());
}

TEST(Cache, SaveMergesWithExistingFile) {
  std::string path = tmpPath("merge");
  std::string why;
  ASSERT_EQ(saveCache(path, {{coll::kAllReduce, 2, 1, 3, Decision{0, 0, 0}, 13.8, 12},
                             {coll::kAllReduce, 8, 1, 3, Decision{1, 0, 0}, 20.0, 12}},
                      &why),
            Status::Ok);
  ASSERT_EQ(saveCache(path, {{coll::kAllReduce, 2, 1, 3, Decision{1, 1, 0}, 11.0, 4}}, &why), Status::Ok);
  std::vector<CacheEntry> out;
  ASSERT_EQ(loadCache(path, &out, &why), Status::Ok);
  ASSERT_EQ(out.size(), 2u);
  for (const CacheEntry& e : out) {
    EXPECT_EQ(e.decision, e.nRanks == 2 ? (Decision{1, 1, 0}) : (Decision{1, 0, 0}));
  }
  unlink(path.c_str());
}

TEST(Cache, MissingFileIsEmptyNotAnError) {
  std::vector<CacheEntry> out;
  std::string why;
  EXPECT_EQ(loadCache("/tmp/icn-definitely-missing-cache.csv", &out, &why), Status::Ok);
  EXPECT_TRUE(out.empty());
}

TEST(Cache, MalformedLinesNameLineAndField) {
  struct C {
    const char* text;
    const char* expect;
  } cases[] = {
      {"# icn-tuner-cache v1\nAllReduce,2,1,21,RING,LL128,0,23.8\n", "c:2: expected 9 fields"},
      {"Bogus,2,1,21,RING,LL128,0,23.8,1\n", "c:1: field 1 (coll)"},
      {"AllReduce,2,1,99,RING,LL128,0,23.8,1\n", "field 4 (bucket_log2)"},
      {"AllReduce,2,1,21,RUNG,LL128,0,23.8,1\n", "field 5 (algo)"},
      {"AllReduce,2,1,21,RING,LL64,0,23.8,1\n", "field 6 (proto)"},
      {"AllReduce,2,1,21,RING,LL128,100,23.8,1\n", "field 7 (channels)"},
      {"AllReduce,2,1,21,RING,LL128,0,fast,1\n", "field 8 (mean_us)"},
  };
  for (const C& c : cases) {
    std::vector<CacheEntry> out;
    std::string why;
    EXPECT_EQ(parseCache(c.text, "c", &out, &why), Status::InvalidArgument) << c.text;
    EXPECT_NE(why.find(c.expect), std::string::npos) << why;
  }
}

// What an online group learned is what a later static group applies.
TEST(Cache, GroupPersistsAtDestructionAndReloads) {
  std::string path = tmpPath("group");
  unlink(path.c_str());
  GroupConfig cfg;
  cfg.mode = Mode::Online;
  cfg.cachePath = path;
  cfg.explore.callsPerArm = 1;
  cfg.explore.confirmCalls = 0;  // three calls: one per candidate, then the round can end
  cfg.explore.warmCalls = 0;
  {
    auto g = acquireGroup(0xCAC4E, 1, 1, cfg);
    int s = g->join();
    float t[21];
    for (int i = 0; i < 21; ++i) t[i] = -1.f;
    t[0] = 5.f;
    t[3] = 6.f;
    t[5] = 7.f;
    for (int i = 0; i < 3; ++i) {
      float c[21];
      std::copy(t, t + 21, c);
      Decision d = g->decide(s, coll::kAllReduce, 12, CostTable(c, 7, 3));
      ASSERT_TRUE(d.valid());
      g->addSample(coll::kAllReduce, 12, Sample{d.algo, d.proto, 2, d.algo == 1 && d.proto == 2 ? 3.0 : 9.0});
    }
    g->leave(s);
  }
  std::vector<CacheEntry> out;
  std::string why;
  ASSERT_EQ(loadCache(path, &out, &why), Status::Ok) << why;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].decision.algo, 1);
  EXPECT_EQ(out[0].decision.proto, 2);
  cfg.mode = Mode::Static;
  auto g2 = acquireGroup(0xCAC4F, 1, 1, cfg);
  int s = g2->join();
  float t[21];
  for (int i = 0; i < 21; ++i) t[i] = 1.f;
  EXPECT_EQ(g2->decide(s, coll::kAllReduce, 12, CostTable(t, 7, 3)), out[0].decision);
  unlink(path.c_str());
}

// A table written under another key (machine, NCCL version, shape) is not reused, and saving under the new key
// replaces it whole.
TEST(Cache, StaleKeyIsNotReused) {
  std::string path = tmpPath("key");
  unlink(path.c_str());
  std::string why;
  ASSERT_EQ(saveCache(path, {{coll::kAllReduce, 2, 1, 3, Decision{0, 0, 0}, 13.8, 12}}, &why, "key A"), Status::Ok);
  std::vector<CacheEntry> out;
  ASSERT_EQ(loadCache(path, &out, &why, "key A"), Status::Ok) << why;
  EXPECT_EQ(out.size(), 1u);
  why.clear();
  ASSERT_EQ(loadCache(path, &out, &why, "key B"), Status::Ok);
  EXPECT_TRUE(out.empty());
  EXPECT_NE(why.find("key A"), std::string::npos) << why;
  ASSERT_EQ(saveCache(path, {{coll::kAllReduce, 2, 1, 4, Decision{1, 2, 0}, 20.0, 12}}, &why, "key B"), Status::Ok);
  ASSERT_EQ(loadCache(path, &out, &why, "key B"), Status::Ok);
  ASSERT_EQ(out.size(), 1u) << "the stale entry is gone";
  EXPECT_EQ(out[0].bucket, 4);
  unlink(path.c_str());
}

// Jobs finishing together: every save is atomic and merges under the directory lock, so the file always parses
// and ends up with every process's entries; it is private (0600) and no temporary file stays behind.
TEST(Cache, ConcurrentSavesFromProcessesMerge) {
  char dirT[] = "/tmp/icn-cache-conc-XXXXXX";
  ASSERT_NE(mkdtemp(dirT), nullptr);
  std::string dir = dirT, path = dir + "/t.csv";
  constexpr int kProcs = 4, kSaves = 20;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int bad = 0;
      for (int i = 0; i < kSaves; ++i) {
        std::string why;
        std::vector<CacheEntry> out;
        bad += saveCache(path, {{coll::kAllReduce, 1 + p * kSaves + i, 1, 3, Decision{1, 2, 0}, 1.0 + i, 1}}, &why) !=
               Status::Ok;
        bad += loadCache(path, &out, &why) != Status::Ok;  // never a torn file
      }
      _exit(bad == 0 ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(k, &st, 0), k);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  std::vector<CacheEntry> out;
  std::string why;
  ASSERT_EQ(loadCache(path, &out, &why), Status::Ok) << why;
  EXPECT_EQ(out.size(), static_cast<size_t>(kProcs * kSaves));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int entries = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
    closedir(d);
  }
  EXPECT_EQ(entries, 1);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

#ifdef ICN_TEST_LIBNCCL
#include <dlfcn.h>
namespace icn::tuner {
// The version in the key comes from the NCCL this process loaded, also when it was opened RTLD_LOCAL (as PyTorch
// does), where ncclGetVersion is not in the global scope. Run in a child: the parent's scope stays NCCL-free.
TEST(CacheKey, NamesTheVersionOfALocallyLoadedNccl) {
  ASSERT_EQ(dlsym(RTLD_DEFAULT, "ncclGetVersion"), nullptr) << "NCCL is already global in this test";
  EXPECT_NE(cacheKey(2, 2, ShapeHints{}).find(" nccl=0 "), std::string::npos) << "no NCCL loaded yet";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    void* nccl = dlopen(ICN_TEST_LIBNCCL, RTLD_NOW | RTLD_LOCAL);
    if (!nccl) _exit(2);
    using Fn = int (*)(int*);
    int v = 0;
    auto fn = reinterpret_cast<Fn>(dlsym(nccl, "ncclGetVersion"));
    if (!fn || fn(&v) != 0 || v <= 0) _exit(3);
    const std::string want = " nccl=" + std::to_string(v) + " ";
    _exit(cacheKey(2, 2, ShapeHints{}).find(want) != std::string::npos ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: NCCL did not load, 3: no version, 4: the key does not name it";
}
}  // namespace icn::tuner
#endif
