// The diagnosis wired into ICN's TCP transport, end to end through the plugin as NCCL drives it: two processes,
// each with a request that cannot complete (a receive of tag 7 whose sender sends tag 9, and that send, whose
// receiver posted no receive of tag 9). Within ICN_HANG_REPORT_S (1 s) plus a tick each process writes its hang
// report naming what it waits for (direction, peer, tag, bytes, whether a first byte or clear-to-send came) and
// WARNs; once the matching requests are posted and everything completes, each rewrites its report as resumed.
// With the tuner off (ICN_TUNER=off: it tunes nothing, yet the processes still meet through its agreement), the
// follower's report reaches the leader (rank 0's process), which writes the merged report naming the mismatch.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "abi/profiler_v5.h"
#include "abi/tuner_v5.h"
#include "pair_runner.h"

namespace {

using icn::testpair::kWait;
using icn::testpair::Rank;

// The text of the file in dir whose kind `merged` asks for (a process's icn-hang-*.json, or the leader's
// icn-hang-merged-*.json) once it contains every needle, or "" after the deadline.
std::string hangFileWith(const std::string& dir, bool merged, std::initializer_list<const char*> needles,
                         std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::string text;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name.rfind("icn-hang-", 0) != 0 || (name.rfind("icn-hang-merged-", 0) == 0) != merged) continue;
        std::ifstream in(dir + "/" + name);
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
      }
      closedir(d);
    }
    bool all = !text.empty();
    for (const char* n : needles) all = all && text.find(n) != std::string::npos;
    if (all) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

std::string reportWith(const std::string& dir, std::initializer_list<const char*> needles,
                       std::chrono::milliseconds limit) {
  return hangFileWith(dir, false, needles, limit);
}

std::string makeDir(const char* what) {
  char tmpl[64];
  snprintf(tmpl, sizeof tmpl, "/tmp/icn-wired-%s-XXXXXX", what);
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

// The reports of a finished run go with their directory.
void removeDir(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') unlink((dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(dir.c_str());
}

// What NCCL does at communicator init when the net plugin also serves as the profiler (NCCL_PROFILER_PLUGIN unset):
// the plugin learns this process's rank and the communicator's size, so reports name ranks.
void announceRank(Rank& r, int nranks) {
  auto* prof = static_cast<const ncclProfiler_v5_t*>(dlsym(r.plugin.dl, "ncclProfiler_v5"));
  ASSERT_NE(prof, nullptr);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(prof->init(&ctx, 0x1234, &mask, "wired", nranks, nranks, r.rank, nullptr), ncclSuccess);
}

// ... and its tuner's init, which joins the communicator's processes (the agreement's leader is rank 0's process).
void* joinTuner(Rank& r, int nranks) {
  auto* tuner = static_cast<const ncclTuner_v5_t*>(dlsym(r.plugin.dl, "ncclTunerPlugin_v5"));
  EXPECT_NE(tuner, nullptr);
  if (!tuner) return nullptr;
  void* ctx = nullptr;
  ncclNvlDomainInfo_v5_t nvl{static_cast<int>(nranks), 1, 1};
  ncclTunerConstants_v5_t constants{};
  EXPECT_EQ(tuner->init(&ctx, 0x1234, nranks, nranks, nullptr, &nvl, &constants), ncclSuccess);
  return ctx;
}

void leaveTuner(Rank& r, void* ctx) {
  auto* tuner = static_cast<const ncclTuner_v5_t*>(dlsym(r.plugin.dl, "ncclTunerPlugin_v5"));
  if (tuner && ctx) EXPECT_EQ(tuner->finalize(ctx), ncclSuccess);
}

std::string mergedWith(const std::string& dir, std::initializer_list<const char*> needles,
                       std::chrono::milliseconds limit) {
  return hangFileWith(dir, true, needles, limit);
}

// icn-hang over the reports of both processes: its output and exit status.
std::string icnHang(const std::string& paths, int* rc) {
  std::string out;
  FILE* p = popen((std::string(ICN_HANG_CLI) + " " + paths + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(p));
  return out;
}

void* post(Rank& r, void* comm, bool send, int tag, std::vector<char>& buf) {
  void* req = nullptr;
  if (send) {
    while (!req) EXPECT_EQ(r.plugin.net->isend(comm, buf.data(), buf.size(), tag, nullptr, nullptr, &req), ncclSuccess);
  } else {
    void* d = buf.data();
    size_t sz = buf.size();
    EXPECT_EQ(r.plugin.net->irecv(comm, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
  }
  return req;
}

TEST(DiagnoseWired, TcpHangReportsNameTheWaitsAndTheirEnd) {
  const std::string dir0 = makeDir("r0"), dir1 = makeDir("r1"), meet = makeDir("meet");
  ASSERT_FALSE(dir0.empty() || dir1.empty() || meet.empty());
  std::array<icn::testpair::RankSetup, 2> setup;
  for (int i = 0; i < 2; i++)
    setup[i].env = {{"ICN_TRANSPORT", "tcp"},
                    {"ICN_HANG_REPORT_S", "1"},
                    {"ICN_HANG_REPORT_DIR", i == 0 ? dir0 : dir1},
                    {"ICN_SOCKET_IFNAME", "lo"},
                    {"ICN_TCP_EAGER_BYTES", "0"},  // the send waits for its clear-to-send
                    {"ICN_TUNER", "off"},
                    {"ICN_TUNER_RENDEZVOUS", meet},
                    {"NCCL_DEBUG", "INFO"}};
  auto out = icn::testpair::runPair(
      [&](Rank& r) {
        announceRank(r, 2);
        void* tuner = joinTuner(r, 2);
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<char> a(4096, 0), b(4096, 0);
        void* stuck = post(r, rc, false, 7, a);  // its sender sends tag 9
        std::string rep = reportWith(dir0, {"\"state\":\"stalled\"", "\"rank\":0,\"peerRank\":1,\"dir\":\"recv\"",
                                            "\"tag\":7", "\"bytes\":4096", "\"ready\":false"},
                                     std::chrono::seconds(10));
        EXPECT_FALSE(rep.empty()) << "no hang report naming the receive of tag 7 from rank 1 within 10 s";
        ASSERT_TRUE(r.peer.barrier());  // both reported
        // The job's reports read together: each rank waits on the other, and the tags of the send and the receive
        // differ: mismatched calls (a cycle), not a link that stopped.
        int status = -1;
        const std::string analysis = icnHang(dir0 + " " + dir1, &status);
        EXPECT_EQ(status, 0) << analysis;
        EXPECT_NE(analysis.find("2 of 2 ranks reported): cycle"), std::string::npos) << analysis;
        EXPECT_NE(analysis.find("waits to receive from rank 1"), std::string::npos) << analysis;
        EXPECT_NE(analysis.find("waits to send to rank 0"), std::string::npos) << analysis;
        // The same analysis at the leader, from its own report and the one its follower sent.
        const std::string merged = mergedWith(dir0, {"\"kind\":\"cycle\"", "\"tag\":9", "\"tag\":7"},
                                              std::chrono::seconds(10));
        EXPECT_FALSE(merged.empty()) << "the leader wrote no merged report naming the cycle of tags 7 and 9";
        ASSERT_TRUE(r.peer.barrier());  // now the requests that match go in
        void* freeing = post(r, rc, false, 9, b);
        EXPECT_EQ(icn::netapi::waitRequest(r.plugin, freeing, nullptr, kWait), ncclSuccess);
        EXPECT_EQ(icn::netapi::waitRequest(r.plugin, stuck, nullptr, kWait), ncclSuccess);
        EXPECT_FALSE(reportWith(dir0, {"\"state\":\"resumed\""}, std::chrono::seconds(5)).empty())
            << "the report was not rewritten as resumed";
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
        leaveTuner(r, tuner);
      },
      [&](Rank& r) {
        announceRank(r, 2);
        void* tuner = joinTuner(r, 2);
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<char> a(4096, 1), b(4096, 2);
        void* stuck = post(r, s, true, 9, a);  // its receiver posted tag 7
        std::string rep = reportWith(dir1, {"\"state\":\"stalled\"", "\"rank\":1,\"peerRank\":0,\"dir\":\"send\"",
                                            "\"tag\":9", "\"bytes\":4096", "\"ready\":false"},
                                     std::chrono::seconds(10));
        EXPECT_FALSE(rep.empty()) << "no hang report naming the send of tag 9 to rank 0 within 10 s";
        ASSERT_TRUE(r.peer.barrier());
        ASSERT_TRUE(r.peer.barrier());
        void* freeing = post(r, s, true, 7, b);
        EXPECT_EQ(icn::netapi::waitRequest(r.plugin, freeing, nullptr, kWait), ncclSuccess);
        EXPECT_EQ(icn::netapi::waitRequest(r.plugin, stuck, nullptr, kWait), ncclSuccess);
        EXPECT_FALSE(reportWith(dir1, {"\"state\":\"resumed\""}, std::chrono::seconds(5)).empty())
            << "the report was not rewritten as resumed";
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
        leaveTuner(r, tuner);
      },
      setup, std::chrono::seconds(90));
  EXPECT_TRUE(out[0].logHas("diagnosis: comm 0x1234: hang report of")) << out[0].log;
  for (int i = 0; i < 2; i++) {
    EXPECT_TRUE(out[i].cleanExit()) << "rank " << i << ":\n" << out[i].log;
    EXPECT_TRUE(out[i].warnHas({"no network progress", "hang report in", i == 0 ? dir0 : dir1})) << out[i].log;
  }
  removeDir(dir0);
  removeDir(dir1);
  std::system(("rm -rf '" + meet + "'").c_str());
}

// The wake-ups of this process's agreement thread (named icn-agree) over `span`, or -1 when it has none.
long agreementWakeups(std::chrono::milliseconds span) {
  auto count = []() -> long {
    DIR* d = opendir("/proc/self/task");
    if (!d) return -1;
    long n = -1;
    while (dirent* e = readdir(d)) {
      const std::string task = std::string("/proc/self/task/") + e->d_name;
      std::ifstream comm(task + "/comm");
      std::string name;
      if (!std::getline(comm, name) || name != "icn-agree") continue;
      std::ifstream status(task + "/status");
      std::string line;
      n = 0;
      while (std::getline(status, line))
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0) n = std::stol(line.substr(line.find(':') + 1));
    }
    closedir(d);
    return n;
  };
  const long before = count();
  std::this_thread::sleep_for(span);
  const long after = count();
  return before < 0 || after < 0 ? -1 : after - before;
}

// With the tuner off the agreement only carries the diagnosis's gathering, whose periods are seconds long: its
// thread must not wake every few milliseconds (a tuning agreement's tick) and take cores from the ranks' threads.
TEST(DiagnoseWired, GatheringAloneWakesItsThreadRarely) {
  const std::string meet = makeDir("quiet");
  ASSERT_FALSE(meet.empty());
  std::array<icn::testpair::RankSetup, 2> setup;
  for (int i = 0; i < 2; i++)
    setup[i].env = {{"ICN_TRANSPORT", "tcp"}, {"ICN_SOCKET_IFNAME", "lo"}, {"ICN_TUNER", "off"},
                    {"ICN_TUNER_RENDEZVOUS", meet}, {"ICN_STRAGGLER_REPORT_S", "1"}};
  auto rank = [&](Rank& r) {
    announceRank(r, 2);
    void* tuner = joinTuner(r, 2);
    void *s = nullptr, *rc = nullptr;
    r.connectPair(&s, &rc);  // both processes joined; the agreement is set up by now or soon
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const long wakeups = agreementWakeups(std::chrono::seconds(3));
    // A 2 ms tick is about 1500 wake-ups in 3 s; the gathering's own tick about 150, plus its messages.
    EXPECT_GE(wakeups, 0) << "no thread named icn-agree in rank " << r.rank;
    EXPECT_LT(wakeups, 450) << "rank " << r.rank << "'s agreement thread woke " << wakeups << " times in 3 s";
    ASSERT_TRUE(r.peer.barrier());
    EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
    EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
    leaveTuner(r, tuner);
  };
  auto out = icn::testpair::runPair(rank, rank, setup, std::chrono::seconds(60));
  for (int i = 0; i < 2; i++) EXPECT_TRUE(out[i].cleanExit()) << "rank " << i << ":\n" << out[i].log;
  std::system(("rm -rf '" + meet + "'").c_str());
}

// UCX shows a receive only when its tag completes: a receive whose sender has not sent is reported as waiting with
// no first byte, and the report turns resumed once it completes. (A UCX send completes locally, into the
// receiver's unexpected queue: there is no send-side wait to report.)
TEST(DiagnoseWired, UcxHangReportNamesAWaitingReceive) {
  const std::string dir0 = makeDir("u0");
  ASSERT_FALSE(dir0.empty());
  std::array<icn::testpair::RankSetup, 2> setup;
  for (int i = 0; i < 2; i++)
    setup[i].env = {{"ICN_TRANSPORT", "ucx"},       {"UCX_TLS", "tcp"},          {"UCX_WARN_UNUSED_ENV_VARS", "n"},
                    {"ICN_HANG_REPORT_S", "1"},     {"ICN_HANG_REPORT_DIR", dir0}, {"ICN_SOCKET_IFNAME", "lo"}};
  setup[1].env[4].second = makeDir("u1");
  auto out = icn::testpair::runPair(
      [&](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<char> a(4096, 0);
        void* waiting = post(r, rc, false, 7, a);
        EXPECT_FALSE(reportWith(dir0, {"\"state\":\"stalled\"", "\"dir\":\"recv\"", "\"tag\":7", "\"ready\":false"},
                                std::chrono::seconds(10))
                         .empty())
            << "no hang report naming the receive of tag 7 within 10 s";
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(icn::netapi::waitRequest(r.plugin, waiting, nullptr, kWait), ncclSuccess);
        EXPECT_FALSE(reportWith(dir0, {"\"state\":\"resumed\""}, std::chrono::seconds(5)).empty())
            << "the report was not rewritten as resumed";
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
      },
      [&](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        ASSERT_TRUE(r.peer.barrier());
        std::vector<char> a(4096, 1);
        EXPECT_EQ(icn::netapi::waitRequest(r.plugin, post(r, s, true, 7, a), nullptr, kWait), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      },
      setup, std::chrono::seconds(90));
  EXPECT_TRUE(out[0].cleanExit()) << out[0].log;
  EXPECT_TRUE(out[1].cleanExit()) << out[1].log;
  EXPECT_TRUE(out[0].warnHas({"no network progress", "waits to receive from", dir0})) << out[0].log;
  removeDir(dir0);
  removeDir(setup[1].env[4].second);
}

}  // namespace
