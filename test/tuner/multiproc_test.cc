// The tuner across processes, as a job with one process per GPU runs it: each rank is its own process (fork +
// exec of this binary), dlopens the built plugin and plays NCCL's part through the C ABI (profiler init with its
// rank, tuner init with the communicator's id, getCollInfo with NCCL's cost table, profiler events for timed
// calls). Each process's timings come from its own synthetic GPU, and they disagree on purpose (one process sees
// another arm fastest, one sees everything slower), the processes run at skewed paces, and in one test they live
// in separate network namespaces. The processes are coupled like NCCL's collectives couple them: none runs more
// than kAhead calls ahead of the slowest (a GPU cannot finish a collective before every rank launched it).
//
// Checked: every process makes the same choice for every call; the leader's measured winner reaches every
// process; a killed or stopped leader or follower ends in agreement that stops (never a divergence) with no call
// held longer than the wait bound; exploration costs at most 5% over NCCL's choice over a size's first 2000 calls.
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

namespace {

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
double gpuUs(int algo, int proto, size_t bytes, int view) {
  static const double big[2][3] = {{160, 70, 52}, {140, 40, 47}};
  static const double small[2][3] = {{12, 14, 20}, {11, 8, 18}};
  double us = bytes == kBig ? big[algo][proto] : small[algo][proto];
  if (view == 1 && bytes == kBig && algo == 0 && proto == 2) us = 30;
  if (view == 2) us *= 1.5;
  return us;
}

const char* kAlgoNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
const char* kProtoNames[] = {"LL", "LL128", "SIMPLE"};

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
int privateTmp(bool nsDone) {
  if (!nsDone && (unshare(CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0)) return -1;
  if (mount("icn-private-tmp", "/tmp", "tmpfs", 0, "mode=1777") != 0) return -1;
  if (mkdir("/tmp/run", 0700) != 0 || mkdir("/tmp/cache", 0700) != 0) return -1;
  setenv("XDG_RUNTIME_DIR", "/tmp/run", 1);
  setenv("XDG_CACHE_HOME", "/tmp/cache", 1);
  return 0;
}

int enterNetns(const std::string& name) {
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

int childMain(const ChildArgs& a) {
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

std::string g_self;

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

size_t sizeOf(int call) { return (call / 20) % 2 ? kSmall : kBig; }

std::pair<int, int> ncclChoice(size_t bytes) {
  float t[21];
  realisticTable(t, static_cast<double>(bytes));
  return ncclPick(t);
}

// The same choice at each call index across a set of processes (the shorter sequences are compared on their length).
void expectSameSequences(const std::vector<Result>& res, const std::vector<int>& ranks) {
  for (int r : ranks) {
    size_t n = std::min(res[ranks[0]].picks.size(), res[r].picks.size());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(res[r].picks[i], res[ranks[0]].picks[i]) << "rank " << r << " diverges from rank " << ranks[0]
                                                          << " at call " << i;
  }
}

// Every process ended cleanly after `calls` calls, all made the same choice at every call, and none warned.
void expectCleanAgreedRun(const std::vector<Result>& res, size_t calls) {
  for (size_t r = 0; r < res.size(); ++r) ASSERT_EQ(res[r].status, 0) << "rank " << r;
  for (size_t r = 0; r < res.size(); ++r) ASSERT_EQ(res[r].picks.size(), calls);
  std::vector<int> all(res.size());
  std::iota(all.begin(), all.end(), 0);
  ASSERT_NO_FATAL_FAILURE(expectSameSequences(res, all));
  for (size_t r = 0; r < res.size(); ++r) EXPECT_FALSE(res[r].has("WARN")) << "rank " << r;
}

void dumpLogs(const std::vector<Result>& res) {
  if (!getenv("ICN_TEST_VERBOSE")) return;
  for (size_t r = 0; r < res.size(); ++r)
    for (const std::string& l : res[r].logs) printf("rank %zu: %s\n", r, l.c_str());
}

// Exploration cost of a rank's picks at `bytes` over the size's first 2000 calls, relative to NCCL's choice.
double explorationCost(const Result& r, size_t bytes) {
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

}  // namespace

// Three processes, one rank each, timings that disagree: every process makes the same choice for every call, the
// leader's winner (Ring/LL128 at 4 MiB, where NCCL picks Ring/Simple) reaches all of them, and exploring costs at
// most 5% over NCCL's choice across a size's first 2000 calls.
TEST(TunerMultiproc, ProcessesAgreeOnEveryCallAndFindTheWinner) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  for (int r = 0; r < 3; ++r) job.start(r, r);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectCleanAgreedRun(res, 6000));
  EXPECT_TRUE(res[0].has("every rank's process joined")) << "the leader started the agreement";
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(res[r].has("joined the agreement leader")) << r;
  // The last calls of each size run the winner under the true costs (decisions take effect W/2 to W calls after
  // the leader's round ends).
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": Ring/LL128 at 4 MiB";
    } else {
      ASSERT_EQ(res[0].picks[i], ncclChoice(kSmall)) << "call " << i << ": NCCL's choice stays at 64 KiB";
    }
  }
  // Something was explored (the plan ran), and it stayed cheap.
  std::set<std::pair<int, int>> tried;
  for (int i = 0; i < 2000; ++i)
    if (sizeOf(i) == kBig) tried.insert(res[0].picks[i]);
  EXPECT_GE(tried.size(), 4u);
  for (size_t bytes : {kBig, kSmall}) {
    double cost = explorationCost(res[0], bytes);
    printf("MULTIPROC exploration cost over the first 2000 calls of %zu B: %.4fx NCCL's choice\n", bytes, cost);
    EXPECT_LE(cost, 1.05) << bytes << " B";
  }
}

// The processes' timings disagree about the winner: the leader (rank 0) sees Tree/Simple fastest at 4 MiB (30 us
// against Ring/LL128's 40), rank 1 sees the true costs (Ring/LL128 40, Tree/Simple 52) and rank 2, the slowest,
// sees each of its calls 1.5x slower (Ring/LL128 60, Tree/Simple 78). A collective takes as long as its slowest rank, so
// the agreed winner is the arm whose slowest process's time is least: Ring/LL128 (60 us against Tree/Simple's
// 78), not the leader's own favourite. The followers' reports reach the leader, which says what it combined.
TEST(TunerMultiproc, LeaderDecidesFromEveryProcessSlowestTimes) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  job.start(0, 1);
  job.start(1, 0);
  job.start(2, 2);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectCleanAgreedRun(res, 6000));
  EXPECT_TRUE(res[0].has("learned TREE/SIMPLE")) << "the leader's own measurements favour Tree/Simple";
  EXPECT_TRUE(res[0].has("3 processes measured")) << "every follower's report reached the leader";
  EXPECT_TRUE(res[0].has("announces RING/LL128"));
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": the slowest process's best arm";
    } else {
      ASSERT_EQ(res[0].picks[i], ncclChoice(kSmall)) << "call " << i << ": NCCL's choice stays at 64 KiB";
    }
  }
}

// Three processes; `victim` is killed (SIGKILL) once it reached call 1500. The survivors must end without error
// (else: empty), having stopped agreeing within the bound.
std::vector<Result> killOneMidway(int victim) {
  Job job(3, 1, 5000);
  EXPECT_TRUE(job.ready());
  if (!job.ready()) return {};
  for (int r = 0; r < 3; ++r) job.start(r, 0);
  while (job.progress(victim) < 1500) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  job.ignore(victim);
  job.signal(victim, SIGKILL);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(res[r].status, 0) << "rank " << r;
    if (res[r].status != 0) return {};
    EXPECT_TRUE(res[r].has("agreement across processes stops at call")) << r;
    EXPECT_LE(res[r].maxCallUs, kWaitMs * 1000.0 + 200'000) << "rank " << r << ": a call waited past the bound";
  }
  return res;
}

// The leader dies while the others go on: they stop agreeing at once (its connection closed) and keep making the
// same choices as each other; no call waits longer than the bound.
TEST(TunerMultiproc, KilledLeaderEndsTheAgreementWithoutDivergence) {
  auto res = killOneMidway(0);
  ASSERT_FALSE(res.empty());
  expectSameSequences(res, {1, 2});
  // After the stop: buckets with no agreed decision end in NCCL's choice (their fixed plans were over).
  for (int i = 4500; i < 5000; ++i) {
    if (sizeOf(i) == kSmall) {
      ASSERT_EQ(res[1].picks[i], ncclChoice(kSmall)) << i;
    }
  }
}

// A follower dies: the leader stops the agreement for everyone (FREEZE at its latest horizon, which no process
// can have passed), so the leader and the surviving follower keep choosing alike.
TEST(TunerMultiproc, KilledFollowerEndsTheAgreementWithoutDivergence) {
  auto res = killOneMidway(2);
  ASSERT_FALSE(res.empty());
  expectSameSequences(res, {0, 1});
}

// The leader stops (SIGSTOP) for a second while the followers run on into its horizon: they wait at most the
// bound, stop agreeing at the horizon they hold and tell the leader; resumed, the leader reads that before it
// announces anything else and stops at the same call. Every process, the leader included, chooses alike.
TEST(TunerMultiproc, StoppedLeaderFreezesEveryProcessAtTheSameCall) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  for (int r = 0; r < 3; ++r) job.start(r, 0);
  while (job.progress(0) < 1500) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  job.ignore(0);
  job.signal(0, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  job.signal(0, SIGCONT);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(res[r].status, 0) << "rank " << r;
  for (int r = 1; r < 3; ++r) {
    EXPECT_TRUE(res[r].has("no horizon from the leader in time")) << r;
    EXPECT_LE(res[r].maxCallUs, kWaitMs * 1000.0 + 200'000) << "rank " << r;
  }
  EXPECT_TRUE(res[0].has("waited in vain")) << "the leader learns why";
  expectSameSequences(res, {0, 1, 2});
}

// Two emulated hosts: network namespaces A (10.78.0.1) and B (10.78.0.2) joined by a veth pair, its end named
// `icnmv` in each.
class TwoHosts {
 public:
  TwoHosts() {
    std::string id = std::to_string(getpid() % 100000);
    ns_[0] = "icnmpA" + id;
    ns_[1] = "icnmpB" + id;
    if (sh("ip netns add " + ns_[0]) != 0) {
      skip_ = true;
      return;
    }
    sh("ip netns add " + ns_[1]);
    ok_ = sh("ip link add icnmv" + id + "a type veth peer name icnmv" + id + "b") == 0;
    const char* addr[2] = {"10.78.0.1/24", "10.78.0.2/24"};
    for (int i = 0; ok_ && i < 2; ++i) {
      std::string dev = "icnmv" + id + (i ? "b" : "a");
      ok_ = sh("ip link set " + dev + " netns " + ns_[i]) == 0 &&
            sh("ip -n " + ns_[i] + " link set " + dev + " name icnmv") == 0 &&
            sh("ip -n " + ns_[i] + " addr add " + addr[i] + " dev icnmv") == 0 &&
            sh("ip -n " + ns_[i] + " link set icnmv up") == 0 && sh("ip -n " + ns_[i] + " link set lo up") == 0;
    }
    // A link just set up may drop the first packets (a lost SYN costs a second): wait until it carries one.
    for (int i = 0; ok_ && i < 50 && sh("ip netns exec " + ns_[1] + " ping -c1 -W1 10.78.0.1") != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~TwoHosts() {
    if (skip_) return;
    for (auto& n : ns_) sh("ip netns del " + n);
  }
  bool skip() const { return skip_; }  // no namespaces here (needs root, iproute2)
  bool ok() const { return ok_; }
  const std::string& ns(int i) const { return ns_[i]; }

 private:
  static int sh(const std::string& c) { return std::system((c + " >/dev/null 2>&1").c_str()); }
  std::string ns_[2];
  bool skip_ = false, ok_ = false;
};

// Ranks on two emulated hosts: rank 0 in one network namespace, ranks 1 and 2 in another, joined by a veth pair;
// the agreement runs over TCP between them (the rendezvous directory is shared, as a cluster's file system is).
TEST(TunerMultiproc, ProcessesInSeparateNetworkNamespacesAgree) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(3, 2, 6000);
  ASSERT_TRUE(job.ready());
  job.start(0, 0, hosts.ns(0));
  job.start(1, 1, hosts.ns(1));
  job.start(2, 2, hosts.ns(1));
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r].status, 0) << "rank " << r;
  expectSameSequences(res, {0, 1, 2});
  EXPECT_TRUE(res[0].has("agreement leader at 10.78.0.1:")) << "the leader listens on its namespace's link";
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(res[r].has("joined the agreement leader at 10.78.0.1:")) << r;
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i;
    }
  }
}

const char* kJobKey = "ICN_AUTH_KEY=0123456789abcdef0123456789abcdef";

// Every call NCCL's choice, in every process that ran to the end.
void expectNcclChoiceEverywhere(const std::vector<Result>& res) {
  for (size_t r = 0; r < res.size(); ++r)
    for (size_t i = 0; i < res[r].picks.size(); ++i)
      ASSERT_EQ(res[r].picks[i], ncclChoice(sizeOf(static_cast<int>(i)))) << "rank " << r << " call " << i;
}

// Hosts that share no directory (each process has its own /tmp, runtime and cache directories) agree through the
// network rendezvous: ICN_TUNER_RENDEZVOUS=tcp://:port takes the host from MASTER_ADDR as torchrun sets it; here
// that is host B, so a follower's process serves the registry and the leader on host A registers there. Every
// process makes the same choice for every call, and exploring found the winner the synthetic GPUs say (Ring/LL128
// at 4 MiB where NCCL's model picks Ring/Simple).
TEST(TunerCrossHost, HostsWithoutSharedDirectoryAgreeThroughTheRegistry) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(3, 2, 6000);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {kJobKey, "MASTER_ADDR=10.78.0.2", "ICN_TUNER_RENDEZVOUS=tcp://:29517"};
  job.start(0, 0, hosts.ns(0), true, env);
  job.start(1, 1, hosts.ns(1), true, env);
  job.start(2, 2, hosts.ns(1), true, env);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectCleanAgreedRun(res, 6000));
  EXPECT_TRUE(res[0].has("agreement leader at 10.78.0.1:")) << "the leader listens on its host's link";
  EXPECT_TRUE(res[0].has("registry 10.78.0.2:29517")) << "the registry's host comes from MASTER_ADDR";
  EXPECT_FALSE(res[0].has("serves the agreement registry")) << "host A does not own 10.78.0.2";
  EXPECT_TRUE(res[1].has("serves the agreement registry") || res[2].has("serves the agreement registry"));
  EXPECT_FALSE(res[1].has("serves the agreement registry") && res[2].has("serves the agreement registry"));
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(res[r].has("joined the agreement leader at 10.78.0.1:")) << r;
  EXPECT_TRUE(res[0].has("every rank's process joined"));
  std::set<std::pair<int, int>> tried;
  for (int i = 0; i < 3000; ++i)
    if (sizeOf(i) == kBig) tried.insert(res[0].picks[i]);
  EXPECT_GE(tried.size(), 4u) << "the fixed plan explored";
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": Ring/LL128 at 4 MiB";
    }
  }
}

// The same hosts without a job key: a network address has no file permissions, so nobody there is trusted. Every
// process says so at WARN and keeps NCCL's choice for every call.
TEST(TunerCrossHost, NetworkRendezvousWithoutJobKeyKeepsNcclChoice) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(3, 2, 2500);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {"ICN_TUNER_RENDEZVOUS=tcp://10.78.0.1:29518"};
  job.start(0, 0, hosts.ns(0), true, env);
  job.start(1, 1, hosts.ns(1), true, env);
  job.start(2, 2, hosts.ns(1), true, env);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(res[r].status, 0) << "rank " << r;
    ASSERT_EQ(res[r].picks.size(), 2500u);
    EXPECT_TRUE(res[r].has("WARN ICN tuner: comm")) << r;
    EXPECT_TRUE(res[r].has("needs the job key")) << r;
  }
  expectNcclChoiceEverywhere(res);
}

// Without ICN_TUNER_RENDEZVOUS, hosts that share no directory cannot find each other: the communicator keeps NCCL's
// choice, and the WARN says how to make it agree.
TEST(TunerCrossHost, DefaultRendezvousAcrossHostsKeepsNcclChoiceAndSaysWhy) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(2, 2, 2500);
  ASSERT_TRUE(job.ready());
  job.start(0, 0, hosts.ns(0), true);
  job.start(1, 0, hosts.ns(1), true);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[r].status, 0) << "rank " << r;
    EXPECT_TRUE(res[r].has("no agreement across processes")) << r;
    EXPECT_LE(res[r].maxAnyUs, 3e6) << "rank " << r << ": the wait for START is bounded (1 s)";
  }
  EXPECT_TRUE(res[1].has("ICN_TUNER_RENDEZVOUS=tcp://host:port")) << "the follower's WARN says what would work";
  expectNcclChoiceEverywhere(res);
}

// Something else holds the registry's address: it sends a well-formed challenge, then a welcome it cannot prove
// (it has no job key). Nobody trusts it: every process WARNs, keeps NCCL's choice, and no call waits past the
// START bound.
TEST(TunerMultiproc, HostileRegistryEndsInNcclChoiceWithinTheBound) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(listen(lfd, 64), 0);
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  int port = ntohs(sa.sin_port);
  std::atomic<bool> stop{false};
  std::atomic<int> served{0};
  std::thread hostile([&] {
    auto frame = [](uint8_t type, size_t n, uint8_t fill) {
      std::string f = {'A', 'N', 'C', 'I', static_cast<char>(type), 0, 0, 0, static_cast<char>(n), 0, 0, 0};
      return f + std::string(n, static_cast<char>(fill));
    };
    while (!stop.load()) {
      pollfd p{lfd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept(lfd, nullptr, nullptr);
      if (c < 0) continue;
      std::string ch = frame(1, 16, 7);  // a challenge with a nonce
      (void)!send(c, ch.data(), ch.size(), MSG_NOSIGNAL);  // a process gone by then is no signal to us
      char buf[512];
      pollfd q{c, POLLIN, 0};
      if (poll(&q, 1, 500) > 0) (void)!read(c, buf, sizeof buf);
      std::string wl = frame(3, 32, 0);  // a welcome whose proof is wrong
      (void)!send(c, wl.data(), wl.size(), MSG_NOSIGNAL);
      served.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      close(c);
    }
  });
  Job job(2, 2, 2500);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {kJobKey, "ICN_TUNER_RENDEZVOUS=tcp://127.0.0.1:" + std::to_string(port)};
  job.start(0, 0, "", true, env);
  job.start(1, 0, "", true, env);
  auto res = job.finish();
  stop.store(true);
  hostile.join();
  close(lfd);
  dumpLogs(res);
  EXPECT_GT(served.load(), 0) << "the processes reached the hostile registry";
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[r].status, 0) << "rank " << r;
    ASSERT_EQ(res[r].picks.size(), 2500u);
    EXPECT_TRUE(res[r].has("did not prove the job key")) << r;
    EXPECT_TRUE(res[r].has("no agreement across processes")) << r;
    EXPECT_LE(res[r].maxAnyUs, 3e6) << "rank " << r << ": the wait for START is bounded (1 s)";
  }
  expectNcclChoiceEverywhere(res);
}


// ---------------------------------------------------------------------------------------------------------------
// A hostile member: this (the test's) process holds the rendezvous secret, as any process of the user does (it reads
// the leader's file) or any holder of the job key (tcp://), and lies to the leader. The honest ranks' processes must
// make the same choice for every call whatever it says, and the leader names it in a WARN.

namespace {

class HostileMember {
 public:
  explicit HostileMember(const Job& job) : job_(job) {}
  ~HostileMember() {
    stop_.store(true);
    if (drain_.joinable()) drain_.join();
  }
  bool join() {
    std::string addr;
    icn::tuner::agree::Token token{};
    return icn::tuner::hostile::readRendezvous(
               icn::tuner::hostile::rendezvousFile(job_.runtimeDir(), job_.commId(), job_.nRanks()), &addr, &token) &&
           wire_.connectTo(addr) && wire_.prove(token, job_.commId(), job_.nRanks());
  }
  // Claims `ranks` and waits for the leader's START.
  bool claimAndStart(const std::vector<int>& ranks, icn::tuner::hostile::Start* st) {
    std::string p;
    return send(icn::tuner::agree::kMembers, icn::tuner::hostile::members(ranks)) &&
           wire_.awaitFrame(icn::tuner::agree::kStart, &p, 5000) && icn::tuner::hostile::parseStart(p, st);
  }
  bool send(uint8_t type, const std::string& payload = {}) { return wire_.send(type, payload); }
  // From now on a thread reads whatever the leader sends (a member that stops reading is another test).
  void drain() {
    drain_ = std::thread([this] {
      uint8_t t = 0;
      std::string p;
      while (!stop_.load())
        if (!wire_.read(&t, &p, 50) && !stop_.load()) {
          pollfd q{wire_.fd(), POLLIN, 0};
          if (poll(&q, 1, 0) > 0 && recv(wire_.fd(), &t, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return;  // closed
        }
    });
  }
  const std::string& name() const { return wire_.name(); }

 private:
  const Job& job_;
  icn::tuner::hostile::Wire wire_;
  std::thread drain_;
  std::atomic<bool> stop_{false};
};

// One WARN line of `r` holding every one of `parts`.
bool warned(const Result& r, std::initializer_list<std::string> parts) {
  for (const std::string& l : r.logs) {
    if (l.rfind("WARN ", 0) != 0) continue;
    bool all = true;
    for (const std::string& p : parts) all = all && l.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

// The honest ranks' processes ran every call to the end and made the same choice for each.
void expectHonestRanksAgree(const std::vector<Result>& res, const std::vector<int>& honest, size_t calls) {
  for (int r : honest) ASSERT_EQ(res[r].status, 0) << "rank " << r;
  for (int r : honest) ASSERT_EQ(res[r].picks.size(), calls) << "rank " << r;
  ASSERT_NO_FATAL_FAILURE(expectSameSequences(res, honest));
}

void waitProgress(const Job& job, int rank, uint64_t calls) {
  auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (job.progress(rank) < calls && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Calls from `from` on where rank `r` left NCCL's choice (its fixed plan or an agreed decision ran).
int tunedCalls(const Result& r, int from) {
  int n = 0;
  for (size_t i = static_cast<size_t>(from); i < r.picks.size(); ++i)
    n += r.picks[i] != ncclChoice(sizeOf(static_cast<int>(i)));
  return n;
}

using icn::tuner::hostile::Start;
namespace wire = icn::tuner::agree;

}  // namespace

// The member joins first and claims the honest follower's rank along with its own: the leader holds every rank and
// sends START at once. The honest follower, joining after it, gets START and every horizon announced, then the stop
// at the last horizon + 1, which no rank has passed: both honest ranks run the same fixed plan and keep NCCL's
// choice after it, and the leader names the member.
TEST(TunerHostileMember, ClaimingAnotherProcessRankCannotSplitTheRanks) {
  Job job(3, 1, 3000);
  ASSERT_TRUE(job.ready());
  job.ignore(2);  // rank 2 is the member's
  job.start(0, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  Start st;
  ASSERT_TRUE(m.claimAndStart({1, 2}, &st)) << "the leader took both claims and started";
  m.drain();
  job.start(1, 0);  // the process really holding rank 1 comes after START
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 3000));
  EXPECT_GT(tunedCalls(res[0], static_cast<int>(st.s)), 0) << "the plan ran from START in both";
  EXPECT_TRUE(warned(res[0], {"claims rank 1, which follower " + m.name() + " claimed first"}));
  EXPECT_TRUE(warned(res[0], {"joined after START"}));
}

// The member claims rank 1 before the process holding it joins: the second claim reveals a lie before START, so
// no rank ever runs a tuned call.
TEST(TunerHostileMember, RankClaimedTwiceBeforeStartKeepsNcclChoiceEverywhere) {
  Job job(3, 1, 2500);
  ASSERT_TRUE(job.ready());
  job.start(0, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  ASSERT_TRUE(m.send(wire::kMembers, icn::tuner::hostile::members({1})));
  m.drain();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  job.start(1, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  job.start(2, 0);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1, 2}, 2500));
  expectNcclChoiceEverywhere(res);
  EXPECT_TRUE(warned(res[0], {"claims rank 1, which follower " + m.name() + " claimed first"}));
}

// A started member holding rank 2 reports more samples than its rank can have taken: dropped, named, and the
// agreement stops where no rank has passed.
TEST(TunerHostileMember, ImpossibleReportStopsWithoutSplittingTheRanks) {
  Job job(3, 1, 3000);
  ASSERT_TRUE(job.ready());
  job.ignore(2);
  job.start(0, 0);
  job.start(1, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  Start st;
  ASSERT_TRUE(m.claimAndStart({2}, &st));
  ASSERT_TRUE(m.send(wire::kReport, icn::tuner::hostile::report(4, 22, 20, 10, 60000)));
  m.drain();
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 3000));
  EXPECT_TRUE(warned(res[0], {m.name(), "more than its 1 ranks can have taken"}));
}

// A started member reports like an honest one (so decisions are agreed), then claims it gave up at START's call,
// long before the horizon: stopping there would take back a decision the ranks are running. The leader stops at
// the horizon it announced + 1 instead, and the honest ranks keep choosing alike.
TEST(TunerHostileMember, DropShortOfTheHorizonCannotTakeBackADecision) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  job.ignore(2);
  job.start(0, 0);
  job.start(1, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  Start st;
  ASSERT_TRUE(m.claimAndStart({2}, &st));
  for (int bucket : {16, 22})  // 64 KiB and 4 MiB: every arm measured, faster than anyone's (the slowest counts)
    ASSERT_TRUE(m.send(wire::kReport, icn::tuner::hostile::report(4, bucket, 21, 1, 2)));
  m.drain();
  waitProgress(job, 0, 5200);
  ASSERT_TRUE(m.send(wire::kDrop, icn::tuner::hostile::u64(st.s)));
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 6000));
  EXPECT_TRUE(res[0].has("every process takes RING/LL128")) << "a decision was in force when the member lied";
  EXPECT_TRUE(warned(res[0], {m.name(), "its choices may differ"}));
  EXPECT_FALSE(res[0].has("stops at call " + std::to_string(st.s + 1) + " ")) << "the stop did not move back";
}

TEST(TunerHostileMember, DropAtAHorizonNeverAnnouncedIsNamed) {
  Job job(3, 1, 3000);
  ASSERT_TRUE(job.ready());
  job.ignore(2);
  job.start(0, 0);
  job.start(1, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  Start st;
  ASSERT_TRUE(m.claimAndStart({2}, &st));
  m.drain();
  waitProgress(job, 0, 1500);
  ASSERT_TRUE(m.send(wire::kDrop, icn::tuner::hostile::u64(st.h + 100000)));
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 3000));
  EXPECT_TRUE(warned(res[0], {m.name(), "beyond any announced"}));
}

// A member sends what only the leader sends (a START of its own): a lie about the protocol.
TEST(TunerHostileMember, LeaderFramesFromAMemberAreNamed) {
  Job job(3, 1, 3000);
  ASSERT_TRUE(job.ready());
  job.ignore(2);
  job.start(0, 0);
  job.start(1, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  Start st;
  ASSERT_TRUE(m.claimAndStart({2}, &st));
  m.drain();
  waitProgress(job, 0, 1500);
  icn::tuner::agree::Writer w;
  w.u64(st.s);
  w.u64(st.h + 5000);
  w.u32(0);
  ASSERT_TRUE(m.send(wire::kStart, w.b));
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 3000));
  EXPECT_TRUE(warned(res[0], {m.name(), "sent START out of order"}));
}

// BYE (a process finalized the communicator) ends the agreement quietly, at the horizon announced + 1 like any stop.
TEST(TunerHostileMember, ByeEndsQuietlyWithoutSplittingTheRanks) {
  Job job(3, 1, 3000);
  ASSERT_TRUE(job.ready());
  job.ignore(2);
  job.start(0, 0);
  job.start(1, 0);
  HostileMember m(job);
  ASSERT_TRUE(m.join());
  Start st;
  ASSERT_TRUE(m.claimAndStart({2}, &st));
  m.drain();
  waitProgress(job, 0, 1500);
  ASSERT_TRUE(m.send(wire::kBye));
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 3000));
  EXPECT_TRUE(res[0].has("follower " + m.name() + " finalized the communicator"));
}

// Another process rewrites the leader's rendezvous file to name itself: the leader sees it before START and stops,
// naming the address, and the follower that read the rewritten file never finds a leader: NCCL's choice everywhere.
TEST(TunerHostileMember, RewrittenRendezvousFileStopsTheLeader) {
  Job job(2, 1, 2500);
  ASSERT_TRUE(job.ready());
  job.start(0, 0);
  std::string file = icn::tuner::hostile::rendezvousFile(job.runtimeDir(), job.commId(), 2), addr;
  icn::tuner::agree::Token token{};
  ASSERT_TRUE(icn::tuner::hostile::readRendezvous(file, &addr, &token));
  {
    std::ofstream out(file + ".tmp");
    out << "icn-agree " << int(icn::tuner::agree::kProtocol) << "\naddr 127.0.0.1:9\ntoken " << std::string(64, 'a')
        << "\n";
  }
  ASSERT_EQ(rename((file + ".tmp").c_str(), file.c_str()), 0);
  job.start(1, 0);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 2500));
  expectNcclChoiceEverywhere(res);
  EXPECT_TRUE(warned(res[0], {"now names 127.0.0.1:9", "another process claims rank 0"}));
}

// A holder of the job key registers itself as the leader before the process holding rank 0 does. The registry does
// not trust whoever came first: two claims of rank 0 void both, every client of that communicator is told, the
// leader stops before START and the follower joins nobody. NCCL's choice everywhere, and the claim is named.
TEST(TunerHostileMember, SecondLeaderAtTheRegistryStopsTheAgreement) {
  int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  std::string registry = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  close(probe);
  Job job(2, 2, 2500);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {kJobKey, "ICN_TUNER_RENDEZVOUS=tcp://" + registry};
  job.start(1, 0, "", false, env);  // the follower's process serves the registry and waits for a leader
  icn::tuner::hostile::Wire reg;
  auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!reg.connectTo(registry) && std::chrono::steady_clock::now() < limit) {
    reg.close();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string key = std::string(kJobKey).substr(strlen("ICN_AUTH_KEY="));
  ASSERT_TRUE(reg.prove(icn::tuner::hostile::registryTokenFor(key), job.commId(), 2));
  icn::tuner::agree::Writer w;
  icn::tuner::agree::putAddr(w, "127.0.0.1:9");
  ASSERT_TRUE(reg.send(wire::kRegister, w.b));
  job.start(0, 0, "", false, env);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 2500));
  expectNcclChoiceEverywhere(res);
  EXPECT_TRUE(warned(res[0], {"two processes claiming rank 0", "127.0.0.1:9"}));
  EXPECT_TRUE(warned(res[1], {"registers leader", "127.0.0.1:9", "two processes claim rank 0"}));
}

// Idle connections from the follower's own address flood the leader's port before and while it joins: the oldest
// unproven ones make room, the follower gets in, every rank tunes alike, and the WARN names the source and a count.
TEST(TunerHostileMember, FloodOfIdleConnectionsDoesNotCostTuning) {
  Job job(2, 1, 6000);
  ASSERT_TRUE(job.ready());
  job.start(0, 0);
  std::string addr;
  icn::tuner::agree::Token token{};
  ASSERT_TRUE(icn::tuner::hostile::readRendezvous(
      icn::tuner::hostile::rendezvousFile(job.runtimeDir(), job.commId(), 2), &addr, &token));
  auto flood = icn::tuner::hostile::idleConnections(addr, 400);
  ASSERT_GE(flood.size(), 300u);
  std::atomic<bool> stop{false};
  std::thread more([&] {  // and more keep coming, 100 a second, for the whole run
    std::deque<std::unique_ptr<icn::tuner::hostile::Wire>> held;
    while (!stop.load()) {
      auto w = std::make_unique<icn::tuner::hostile::Wire>();
      if (w->connectTo(addr)) held.push_back(std::move(w));
      if (held.size() > 100) held.pop_front();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  job.start(1, 0);
  auto res = job.finish();
  stop.store(true);
  more.join();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectHonestRanksAgree(res, {0, 1}, 6000));
  EXPECT_TRUE(res[0].has("every rank's process joined")) << "the follower got in";
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": tuning was not lost";
    }
  }
  EXPECT_TRUE(warned(res[0], {"127.0.0.1: ", "floods the agreement port"}));
}

int main(int argc, char** argv) {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  g_self = n > 0 ? std::string(self, static_cast<size_t>(n)) : argv[0];
  if (argc >= 13 && std::string(argv[1]) == "--child") {
    ChildArgs a;
    a.rank = atoi(argv[2]);
    a.nRanks = atoi(argv[3]);
    a.nNodes = atoi(argv[4]);
    a.calls = atoi(argv[5]);
    a.view = atoi(argv[6]);
    a.commId = strtoull(argv[7], nullptr, 10);
    a.plugin = argv[8];
    a.shared = argv[9];
    a.out = argv[10];
    a.netns = argv[11];
    a.privateTmp = std::string(argv[12]) == "1";
    return childMain(a);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
