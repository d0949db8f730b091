// The harness of the tuner's multi-process tests (multiproc_test.cc, multiproc_hostile_test.cc): each rank is a
// child process of the test binary (fork + exec with --child) that dlopens the plugin and plays NCCL's part through
// the C ABI; the parent starts them as a Job, couples their paces through a shared file and reads back what each
// chose and logged.
#pragma once
#include <dlfcn.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <numeric>
#include <vector>

#include "abi/profiler_v5.h"
#include "abi/tuner_v5.h"
#include "agree_hostile.h"
#include "nccl_log.h"
#include "nccl_pick.h"

namespace icn::tunertest {

constexpr int kMaxRanks = 8;
constexpr uint64_t kAhead = 64;  // calls a process may run ahead of the slowest one
constexpr size_t kBig = 4 << 20, kSmall = 64 << 10;
constexpr int kWaitMs = 100;  // ICN_TUNER_AGREE_WAIT_MS in these tests

// Shared by the processes (a file mapped by each): progress per rank, and which ranks the coupling ignores (a
// rank the test stopped or killed: the others run on, as if NCCL's collectives did not need it).
struct Shared {
  std::atomic<uint64_t> progress[kMaxRanks];
  std::atomic<uint32_t> ignore[kMaxRanks];
};

// The synthetic GPU: microseconds per call for (algo, proto) at a size. 4 MiB: Ring/LL128 is fastest where NCCL's
// model picks Ring/Simple; 64 KiB: NCCL's choice (Ring/LL128) is fastest. `view`: 0 the true costs, 1 a process that
// sees Tree/Simple fastest at 4 MiB, 2 a process whose every call looks 1.5x slower.
inline double gpuUs(int algo, int proto, size_t bytes, int view) {
  static const double big[2][3] = {{160, 70, 52}, {140, 40, 47}};
  static const double small[2][3] = {{12, 14, 20}, {11, 8, 18}};
  double us = bytes == kBig ? big[algo][proto] : small[algo][proto];
  if (view == 1 && bytes == kBig && algo == 0 && proto == 2) us = 30;
  if (view == 2) us *= 1.5;
  return us;
}

inline const char* kAlgoNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
inline const char* kProtoNames[] = {"LL", "LL128", "SIMPLE"};

// ---------------------------------------------------------------------------------------------------------------
// Child: one rank.

using icn::testing::ncclLogger;

struct ChildArgs {
  int rank = 0, nRanks = 3, nNodes = 1, calls = 4000, view = 0;
  uint64_t commId = 0;
  std::string plugin, shared, out, netns;
  bool privateTmp = false;  // a host of its own: /tmp (runtime and cache directories inside) seen by it alone
};

// The process's own /tmp (a tmpfs in a mount namespace of its own), with the per-user runtime and cache
// directories inside it: nothing a process of another emulated host writes there can be seen.
inline int privateTmp(bool nsDone) {
  if (!nsDone && (unshare(CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0)) return -1;
  if (mount("icn-private-tmp", "/tmp", "tmpfs", 0, "mode=1777") != 0) return -1;
  if (mkdir("/tmp/run", 0700) != 0 || mkdir("/tmp/cache", 0700) != 0) return -1;
  setenv("XDG_RUNTIME_DIR", "/tmp/run", 1);
  setenv("XDG_CACHE_HOME", "/tmp/cache", 1);
  return 0;
}

inline int enterNetns(const std::string& name) {
  std::string p = "/var/run/netns/" + name;
  int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) return -1;
  close(fd);
  // As `ip netns exec`: /sys shows the namespace's interfaces.
  if (unshare(CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0 ||
      umount2("/sys", MNT_DETACH) != 0 || mount(name.c_str(), "/sys", "sysfs", 0, nullptr) != 0)
    return -1;
  return 0;
}

inline int childMain(const ChildArgs& a) {
  // The job's files first: a private /tmp hides them.
  int sfd = open(a.shared.c_str(), O_RDWR);
  auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0));
  if (sfd < 0 || sh == MAP_FAILED) return 3;
  std::ofstream out(a.out);
  // The plugin too: the build directory may itself lie under /tmp (a throw-away clone), which the private /tmp
  // hides. dlopen through the descriptor loads the file opened here.
  int pluginFd = open(a.plugin.c_str(), O_RDONLY | O_CLOEXEC);
  if (pluginFd < 0) {
    fprintf(stderr, "rank %d: cannot open the plugin %s: %s\n", a.rank, a.plugin.c_str(), strerror(errno));
    return 4;
  }
  if (!a.netns.empty() && enterNetns(a.netns) != 0) {
    fprintf(stderr, "rank %d: cannot enter netns %s: %s\n", a.rank, a.netns.c_str(), strerror(errno));
    return 2;
  }
  if (a.privateTmp && privateTmp(!a.netns.empty()) != 0) {
    fprintf(stderr, "rank %d: cannot make a private /tmp: %s\n", a.rank, strerror(errno));
    return 2;
  }
  const std::string pluginPath = "/proc/self/fd/" + std::to_string(pluginFd);
  void* lib = dlopen(pluginPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 4;
  }
  auto* tuner = static_cast<const ncclTuner_v5_t*>(dlsym(lib, "ncclTunerPlugin_v5"));
  auto* prof = static_cast<const ncclProfiler_v5_t*>(dlsym(lib, "ncclProfiler_v5"));
  int mask = 0;
  void *pctx = nullptr, *tctx = nullptr;
  ncclNvlDomainInfo_v5_t nvl{a.nNodes, a.nRanks / a.nNodes, a.nRanks / a.nNodes};
  ncclTunerConstants_v5_t constants{};
  if (prof->init(&pctx, a.commId, &mask, "multiproc", a.nNodes, a.nRanks, a.rank, ncclLogger) != ncclSuccess ||
      tuner->init(&tctx, a.commId, a.nRanks, a.nNodes, ncclLogger, &nvl, &constants) != ncclSuccess)
    return 5;
  std::mt19937 rng(1234 + a.rank);
  uint64_t gpuClock = 1'000'000, seq = 0;
  double maxCallUs = 0, maxAnyUs = 0;
  for (int i = 0; i < a.calls; ++i) {
    // NCCL's coupling: a call cannot run far ahead of the slowest rank's.
    auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < a.nRanks; ++r)
      while (r != a.rank && !sh->ignore[r].load() && sh->progress[r].load() + kAhead < static_cast<uint64_t>(i)) {
        if (std::chrono::steady_clock::now() > limit) return 6;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    size_t bytes = (i / 20) % 2 ? kSmall : kBig;  // nccl-tests style: 20 calls of a size, then the other
    int active = __atomic_load_n(&mask, __ATOMIC_RELAXED);
    float table[7][3];
    realisticTable(&table[0][0], static_cast<double>(bytes));
    int nChannels = 0;
    auto t0 = std::chrono::steady_clock::now();
    if (tuner->getCollInfo(tctx, ncclFuncAllReduce, bytes, 1, reinterpret_cast<float**>(table), 7, 3, 0,
                           &nChannels) != ncclSuccess)
      return 7;
    // The horizon waits (after START, which comes at call 1024 or soon after; the wait for START is bounded apart).
    double callUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 1500) maxCallUs = std::max(maxCallUs, callUs);
    maxAnyUs = std::max(maxAnyUs, callUs);
    auto [algo, proto] = ncclPick(&table[0][0]);
    out << i << ' ' << algo << ' ' << proto << '\n';
    // The GPU runs the call; the profiler sees it when NCCL's mask asked for it at enqueue time.
    double us = gpuUs(algo, proto, bytes, a.view) * std::uniform_real_distribution<double>(0.98, 1.02)(rng);
    uint64_t start = gpuClock, dur = static_cast<uint64_t>(us * 1000);
    gpuClock += dur + 1000;
    uint64_t mySeq = seq++;
    if (active & ncclProfileColl) {
      ncclProfilerEventDescr_v5_t d{};
      d.type = ncclProfileColl;
      d.coll.seqNumber = mySeq;
      d.coll.func = "AllReduce";
      d.coll.count = bytes / 4;
      d.coll.datatype = "ncclFloat32";
      d.coll.nChannels = 8;
      d.coll.algo = kAlgoNames[algo];
      d.coll.proto = kProtoNames[proto];
      void* coll = nullptr;
      prof->startEvent(pctx, &coll, &d);
      prof->stopEvent(coll);
      if (coll && (active & ncclProfileKernelCh)) {
        std::vector<void*> chs;
        for (int c = 0; c < 8; ++c) {
          ncclProfilerEventDescr_v5_t k{};
          k.type = ncclProfileKernelCh;
          k.parentObj = coll;
          k.kernelCh.channelId = static_cast<uint8_t>(c);
          k.kernelCh.pTimer = start + c * 10;
          void* h = nullptr;
          prof->startEvent(pctx, &h, &k);
          chs.push_back(h);
        }
        for (int c = 7; c >= 0; --c) {
          ncclProfilerEventStateArgs_v5_t s{};
          s.kernelCh.pTimer = start + dur - (7 - c) * 5;
          prof->recordEventState(chs[c], ncclProfilerKernelChStop, &s);
          prof->stopEvent(chs[c]);
        }
      }
    }
    sh->progress[a.rank].store(static_cast<uint64_t>(i + 1));
    // Skewed paces: each process pauses at its own moments.
    if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
  }
  tuner->finalize(tctx);
  prof->finalize(pctx);
  out << "maxCallUs " << maxCallUs << '\n';
  out << "maxAnyUs " << maxAnyUs << '\n';
  for (const auto& l : icn::testing::ncclLogLines()) {
    char ms[32];
    snprintf(ms, sizeof ms, " [%.1f ms]", l.ms);
    out << "log " << (l.level == NCCL_LOG_WARN ? "WARN " : "INFO ") << l.text << ms << '\n';
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Parent.

inline std::string g_self;  // this binary: the children exec it

struct Result {
  std::vector<std::pair<int, int>> picks;
  double maxCallUs = 0, maxAnyUs = 0;
  std::vector<std::string> logs;
  int status = -1;
  bool has(const std::string& s) const {
    for (const std::string& l : logs)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

class Job {
 public:
  Job(int nRanks, int nNodes, int calls) : nRanks_(nRanks), nNodes_(nNodes), calls_(calls) {
    char t[] = "/tmp/icn-multiproc-XXXXXX";
    dir_ = mkdtemp(t) ? t : "";
    shared_ = dir_ + "/shared";
    int fd = open(shared_.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd >= 0 && ftruncate(fd, sizeof(Shared)) == 0)
      sh_ = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (fd >= 0) close(fd);
    std::random_device rd;
    commId_ = (static_cast<uint64_t>(rd()) << 32) | rd();
  }
  ~Job() {
    for (pid_t p : pids_)
      if (p > 0) kill(p, SIGKILL), waitpid(p, nullptr, 0);
    if (sh_) munmap(sh_, sizeof(Shared));
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // Starts rank r's process (`view`: its synthetic GPU, `netns`: a network namespace to enter, `privateTmp`: a /tmp
  // of its own, `env`: more settings as NAME=VALUE).
  void start(int r, int view, const std::string& netns = "", bool privateTmp = false,
             const std::vector<std::string>& env = {}) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string cache = dir_ + "/cache" + std::to_string(r);
      setenv("XDG_CACHE_HOME", cache.c_str(), 1);
      setenv("XDG_RUNTIME_DIR", (dir_ + "/run").c_str(), 1);  // the rendezvous directory every process reaches
      setenv("ICN_TUNER_AGREE_WAIT_MS", std::to_string(kWaitMs).c_str(), 1);
      setenv("ICN_TUNER", "online", 1);
      setenv("ICN_SOCKET_IFNAME", netns.empty() ? "lo" : "icnmv", 1);
      for (const std::string& e : env) putenv(strdup(e.c_str()));
      std::vector<std::string> args = {g_self, "--child", std::to_string(r), std::to_string(nRanks_),
                                       std::to_string(nNodes_), std::to_string(calls_), std::to_string(view),
                                       std::to_string(commId_), ICN_PLUGIN_PATH, shared_, out(r), netns,
                                       privateTmp ? "1" : "0"};
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(g_self.c_str(), argv.data());
      _exit(127);
    }
    if (static_cast<int>(pids_.size()) <= r) pids_.resize(r + 1, -1);
    pids_[r] = pid;
  }
  void ignore(int r) { sh_->ignore[r].store(1); }
  void signal(int r, int sig) { kill(pids_[r], sig); }
  uint64_t progress(int r) const { return sh_->progress[r].load(); }
  // Waits for every process (60 s at most) and reads what each wrote.
  std::vector<Result> finish() {
    std::vector<Result> res(nRanks_);
    auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < nRanks_; ++r) {
      if (static_cast<int>(pids_.size()) <= r || pids_[r] <= 0) continue;  // a rank no process of ours holds
      int st = 0;
      while (waitpid(pids_[r], &st, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > limit) kill(pids_[r], SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      pids_[r] = -1;
      res[r].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      std::ifstream in(out(r));
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("log ", 0) == 0) {
          res[r].logs.push_back(line.substr(4));
        } else if (line.rfind("maxCallUs ", 0) == 0) {
          res[r].maxCallUs = atof(line.c_str() + 10);
        } else if (line.rfind("maxAnyUs ", 0) == 0) {
          res[r].maxAnyUs = atof(line.c_str() + 9);
        } else {
          int i, a, p;
          if (sscanf(line.c_str(), "%d %d %d", &i, &a, &p) == 3) res[r].picks.push_back({a, p});
        }
      }
    }
    return res;
  }
  bool ready() const { return sh_ != nullptr; }
  uint64_t commId() const { return commId_; }
  int nRanks() const { return nRanks_; }
  // The runtime directory every rank's process finds the leader's rendezvous file in.
  std::string runtimeDir() const { return dir_ + "/run"; }

 private:
  std::string out(int r) const { return dir_ + "/rank" + std::to_string(r) + ".txt"; }
  int nRanks_, nNodes_, calls_;
  std::string dir_, shared_;
  Shared* sh_ = nullptr;
  uint64_t commId_ = 0;
  std::vector<pid_t> pids_;
};

inline size_t sizeOf(int call) { return (call / 20) % 2 ? kSmall : kBig; }

inline std::pair<int, int> ncclChoice(size_t bytes) {
  float t[21];
  realisticTable(t, static_cast<double>(bytes));
  return ncclPick(t);
}

// The same choice at each call index across a set of processes (the shorter sequences are compared on their length).
inline void expectSameSequences(const std::vector<Result>& res, const std::vector<int>& ranks) {
  for (int r : ranks) {
    size_t n = std::min(res[ranks[0]].picks.size(), res[r].picks.size());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(res[r].picks[i], res[ranks[0]].picks[i]) << "rank " << r << " diverges from rank " << ranks[0]
                                                          << " at call " << i;
  }
}

// Every process ended cleanly after `calls` calls, all made the same choice at every call, and none warned.
inline void expectCleanAgreedRun(const std::vector<Result>& res, size_t calls) {
  for (size_t r = 0; r < res.size(); ++r) ASSERT_EQ(res[r].status, 0) << "rank " << r;
  for (size_t r = 0; r < res.size(); ++r) ASSERT_EQ(res[r].picks.size(), calls);
  std::vector<int> all(res.size());
  std::iota(all.begin(), all.end(), 0);
  ASSERT_NO_FATAL_FAILURE(expectSameSequences(res, all));
  for (size_t r = 0; r < res.size(); ++r) EXPECT_FALSE(res[r].has("WARN")) << "rank " << r;
}

inline void dumpLogs(const std::vector<Result>& res) {
  if (!getenv("ICN_TEST_VERBOSE")) return;
  for (size_t r = 0; r < res.size(); ++r)
    for (const std::string& l : res[r].logs) printf("rank %zu: %s\n", r, l.c_str());
}

// Exploration cost of a rank's picks at `bytes` over the size's first 2000 calls, relative to NCCL's choice.
inline double explorationCost(const Result& r, size_t bytes) {
  double ours = 0, nccl = 0;
  auto base = ncclChoice(bytes);
  int n = 0;
  for (size_t i = 0; i < r.picks.size() && n < 2000; ++i) {
    if (sizeOf(static_cast<int>(i)) != bytes) continue;
    ours += gpuUs(r.picks[i].first, r.picks[i].second, bytes, 0);
    nccl += gpuUs(base.first, base.second, bytes, 0);
    ++n;
  }
  return n ? ours / nccl : 0;
}


inline const char* kJobKey = "ICN_AUTH_KEY=0123456789abcdef0123456789abcdef";

// Every call NCCL's choice, in every process that ran to the end.
inline void expectNcclChoiceEverywhere(const std::vector<Result>& res) {
  for (size_t r = 0; r < res.size(); ++r)
    for (size_t i = 0; i < res[r].picks.size(); ++i)
      ASSERT_EQ(res[r].picks[i], ncclChoice(sizeOf(static_cast<int>(i)))) << "rank " << r << " call " << i;
}
}  // namespace icn::tunertest
