// The process-side diagnosis: connections opened through the registry, the hang watch writing, rewriting and
// resolving its report, a leader merging reports, and the straggler period logging what it finds.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>


#include "../reliability/log_capture.h"
#include "diagnose/registry.h"
#include "diagnose/service.h"
#include "diagnose/watch.h"

using namespace icn::diagnose;

namespace {

constexpr uint64_t kMs = 1000000, kS = 1000 * kMs;
constexpr uint64_t kComm = 0xfeed;

std::string freshDir() {
  static int n = 0;
  const std::string d = ::testing::TempDir() + "icn-diagnose-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  return d;
}

Settings hangSettings(const std::string& dir) {
  Settings s;
  s.hangReportS = 2;
  s.stragglerPeriodS = 0;
  s.reportDir = dir;
  return s;
}

ProcessReport readOwn(const std::string& dir) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<ProcessReport> r;
  std::string why;
  EXPECT_TRUE(readReports(dir + "/" + reportFileName(host, getpid()), &r, &why)) << why;
  return r.empty() ? ProcessReport{} : r[0];
}

bool lineWith(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

LinkInfo link(int rank, int peer, Dir d) {
  return LinkInfo{kComm, rank, peer, "me", "10.0.0." + std::to_string(rank + 1), "p" + std::to_string(peer),
                  "10.0.0." + std::to_string(peer + 1), d};
}

class DiagnoseService : public ::testing::Test {
 protected:
  void SetUp() override {
    icn::testing::installLogCapture();
    links::resetForTesting();
    icn::testing::takeWarnings();
    icn::testing::takeInfos();
  }
  void TearDown() override { links::resetForTesting(); }
};

}  // namespace

TEST_F(DiagnoseService, StallWritesTheReportRewritesItAndMarksItResumed) {
  const std::string dir = freshDir();
  Diagnoser d(hangSettings(dir));
  links::setCommSize(kComm, 0, 4);
  auto recv = links::open(link(0, 1, Dir::Recv));
  const OpId op = recv->onRecvPosted(7, 4096, 1 * kS);
  d.tick(2500 * kMs);
  ProcessReport r;
  EXPECT_FALSE(d.currentReport(&r));
  d.tick(3500 * kMs);
  ASSERT_TRUE(d.currentReport(&r));
  ProcessReport onDisk = readOwn(dir);
  EXPECT_TRUE(onDisk.stalled);
  EXPECT_NEAR(onDisk.noProgressS, 2.5, 1e-9);
  ASSERT_EQ(onDisk.waits.size(), 1u);
  EXPECT_EQ(onDisk.waits[0].peerRank, 1);
  EXPECT_EQ(onDisk.waits[0].peerAddr, "10.0.0.2");
  EXPECT_EQ(onDisk.waits[0].tag, 7);
  EXPECT_FALSE(onDisk.waits[0].ready);
  ASSERT_EQ(onDisk.ranks.size(), 1u);
  EXPECT_EQ(onDisk.ranks[0].nranks, 4);
  const auto warns = icn::testing::takeWarnings();
  EXPECT_TRUE(icn::testing::warned(warns, {"no network progress for 2.5 s", "rank 0 waits to receive from rank 1 on p1",
                                           "tag 7, 0 of 4096 bytes"}));
  d.tick(4 * kS);  // rewritten only every ICN_HANG_REPORT_S
  EXPECT_NEAR(readOwn(dir).noProgressS, 2.5, 1e-9);
  d.tick(5600 * kMs);
  EXPECT_NEAR(readOwn(dir).noProgressS, 4.6, 1e-9);
  EXPECT_TRUE(icn::testing::takeWarnings().empty());  // one WARN per stall
  recv->onFirstByte(op, 6 * kS);
  d.tick(6100 * kMs);
  EXPECT_FALSE(readOwn(dir).stalled);
  EXPECT_FALSE(d.currentReport(&r));
  EXPECT_TRUE(lineWith(icn::testing::takeInfos(), "network progress resumed after 5.0 s without"));
  // The report directory is private.
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// An idle process (nothing pending) reports once, silently: the analysis learns it is alive.
TEST_F(DiagnoseService, IdleProcessReportsOnceAndSaysNothing) {
  const std::string dir = freshDir();
  Diagnoser d(hangSettings(dir));
  auto send = links::open(link(3, 0, Dir::Send));
  const OpId op = send->onSendPosted(1, 10, 1 * kS);
  send->onClearToSend(op, 1 * kS);
  send->onSendDone(op, 10, 1 * kS);
  d.tick(3500 * kMs);
  EXPECT_TRUE(readOwn(dir).waits.empty());
  EXPECT_TRUE(icn::testing::takeWarnings().empty());
  ProcessReport r;
  ASSERT_TRUE(d.currentReport(&r));
  EXPECT_EQ(r.ranks.at(0).rank, 3);
}

TEST_F(DiagnoseService, OffWhenZero) {
  const std::string dir = freshDir();
  Settings s = hangSettings(dir);
  s.hangReportS = 0;
  Diagnoser d(s);
  auto recv = links::open(link(0, 1, Dir::Recv));
  recv->onRecvPosted(7, 4096, 1 * kS);
  d.tick(100 * kS);
  ProcessReport r;
  EXPECT_FALSE(d.currentReport(&r));
  EXPECT_NE(access(dir.c_str(), F_OK), 0);  // nothing written, not even the directory
}

// The leader holds rank 0; rank 1's process sent its report, rank 2's did not: the merged file names rank 2.
TEST_F(DiagnoseService, LeaderMergesReportsAndNamesTheRoot) {
  const std::string dir = freshDir();
  Diagnoser d(hangSettings(dir));
  links::setCommSize(kComm, 0, 3);
  auto recv = links::open(link(0, 2, Dir::Recv));
  recv->onRecvPosted(3, 1 << 20, 1 * kS);
  d.tick(4 * kS);
  ProcessReport follower;
  follower.host = "p1";
  follower.pid = 77;
  follower.timeUnixMs = Diagnoser::buildReport(0, 0, 0).timeUnixMs;
  follower.noProgressS = 3;
  follower.ranks.push_back(RankEntry{kComm, 1, 3, "10.0.0.2"});
  WaitEntry w;
  w.commId = kComm;
  w.rank = 1;
  w.peerRank = 2;
  w.dir = Dir::Send;
  w.peerHost = "p2";
  w.postedS = 3;
  follower.waits.push_back(w);
  d.addRemoteReport(follower);
  d.tick(4100 * kMs);
  const std::vector<HangAnalysis> a = d.lastAnalysis();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RootKind::MissingProcess);
  EXPECT_EQ(a[0].roots, std::vector<int>{2});
  EXPECT_TRUE(
      icn::testing::warned(icn::testing::takeWarnings(), {"hang on comm 0xfeed: Rank 2 on p2", "did not report"}));
  std::vector<ProcessReport> merged;
  std::string why;
  ASSERT_TRUE(readReports(dir + "/" + mergedFileName(kComm), &merged, &why)) << why;
  EXPECT_EQ(merged.size(), 2u);
  d.addRemoteReport(follower);  // the same picture again: no second WARN
  d.tick(4200 * kMs);
  EXPECT_TRUE(icn::testing::takeWarnings().empty());
}

// A leader that is not stalled itself takes part with what it waits for now, not as a process that did not report.
TEST_F(DiagnoseService, LeaderThatIsNotStalledIsNoMissingProcess) {
  Diagnoser d(hangSettings(freshDir()));
  links::setCommSize(kComm, 0, 2);
  auto send = links::open(link(0, 1, Dir::Send));
  const OpId op = send->onSendPosted(1, 10, 9 * kS);
  send->onClearToSend(op, 9 * kS);
  send->onSendDone(op, 10, 9 * kS);
  ProcessReport follower;
  follower.host = "p1";
  follower.pid = 78;
  follower.timeUnixMs = Diagnoser::buildReport(0, 0, 0).timeUnixMs;
  follower.ranks.push_back(RankEntry{kComm, 1, 2, ""});
  WaitEntry w;
  w.commId = kComm;
  w.rank = 1;
  w.peerRank = 0;
  w.postedS = 25;
  follower.waits.push_back(w);
  d.addRemoteReport(follower);
  d.tick(10 * kS);
  ProcessReport own;
  EXPECT_FALSE(d.currentReport(&own));  // 1 s since its last send: no stall of its own
  const std::vector<HangAnalysis> a = d.lastAnalysis();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RootKind::IdleRank);
  EXPECT_EQ(a[0].roots, std::vector<int>{0});
  EXPECT_TRUE(a[0].missing.empty());
  // The follower resumes: no process is stalled, so there is no hang to name (and no WARN about one).
  follower.stalled = false;
  follower.timeUnixMs += 1000;
  icn::testing::takeWarnings();
  d.addRemoteReport(follower);
  d.tick(11 * kS);
  EXPECT_TRUE(d.lastAnalysis().empty());
  EXPECT_TRUE(icn::testing::takeWarnings().empty());
}

// A leader with traffic in flight but no stall of its own: its pending operations are not waits, so a follower's
// resumed report next to them names no hang.
TEST_F(DiagnoseService, LeaderTrafficAfterAStallIsNoHang) {
  Diagnoser d(hangSettings(freshDir()));
  links::setCommSize(kComm, 0, 2);
  auto recv = links::open(link(0, 1, Dir::Recv));
  recv->onRecvPosted(3, 4096, 9 * kS);  // in flight, posted a second before the tick
  ProcessReport follower;
  follower.host = "p1";
  follower.pid = 79;
  follower.stalled = false;
  follower.timeUnixMs = Diagnoser::buildReport(0, 0, 0).timeUnixMs;
  follower.ranks.push_back(RankEntry{kComm, 1, 2, ""});
  d.addRemoteReport(follower);
  icn::testing::takeWarnings();
  d.tick(10 * kS);
  EXPECT_TRUE(d.lastAnalysis().empty());
  EXPECT_TRUE(icn::testing::takeWarnings().empty());
}

namespace {

// Four ranks of one communicator in this process, all-to-all; receives from `slow` wait 4 ms, the others 50 us.
void allToAllPeriod(std::vector<std::shared_ptr<LinkMonitor>>& recvs, int slow, uint64_t start) {
  for (int i = 0; i < 40; i++) {
    const uint64_t t = start + static_cast<uint64_t>(i) * 10 * kMs;
    for (auto& m : recvs) {
      const bool late = m->info().peerRank == slow;
      const bool own = m->info().rank == slow;
      const OpId op = m->onRecvPosted(i, 1000, t);
      m->onFirstByte(op, t + (late ? 4 * kMs : own ? 5000 : 50000));
      m->onRecvDone(op, 1000, t + 4 * kMs + 10000);
    }
  }
}

}  // namespace

TEST_F(DiagnoseService, StragglerPeriodLogsExportsAndTakesRemoteSummaries) {
  Settings s;
  s.hangReportS = 0;
  s.stragglerPeriodS = 1;
  Diagnoser d(s);
  std::vector<std::shared_ptr<LinkMonitor>> recvs;
  for (int r = 0; r < 4; r++)
    for (int p = 0; p < 4; p++)
      if (p != r) recvs.push_back(links::open(link(r, p, Dir::Recv)));
  d.tick(1 * kS);  // the first period starts
  for (int period = 0; period < 2; period++) {
    allToAllPeriod(recvs, 2, (1 + period) * kS);
    d.tick((2 + period) * kS);
  }
  const auto infos = icn::testing::takeInfos();
  EXPECT_TRUE(lineWith(infos, "straggler: comm 0xfeed: rank 2 on me (10.0.0.3) is late by a median 4.0 ms on 3 of 3 "
                              "connections receiving from it"))
      << (infos.empty() ? "" : infos.back());
  ASSERT_EQ(d.activeFindings().size(), 1u);
  EXPECT_NE(d.prometheusLines("n").find("icn_straggler_late_seconds{node=\"n\",comm_id=\"0xfeed\",rank=\"2\""),
            std::string::npos);
  EXPECT_NE(d.heatmapJson().find("\"kind\":\"late_rank\""), std::string::npos);
  std::vector<PeerSummary> mine;
  std::string why;
  ASSERT_TRUE(summariesFromJson(d.localSummariesJson(), &mine, &why)) << why;
  EXPECT_EQ(mine.size(), 12u);

  // The same picture seen by a leader holding ranks 0 and 1 only, the others' summaries sent to it.
  links::resetForTesting();
  Diagnoser leader(s);
  std::vector<std::shared_ptr<LinkMonitor>> own;
  for (auto& m : recvs)
    if (m->info().rank < 2) own.push_back(links::open(m->info()));
  std::vector<std::shared_ptr<LinkMonitor>> others;
  for (auto& m : recvs)
    if (m->info().rank >= 2) others.push_back(std::make_shared<LinkMonitor>(m->info()));
  leader.tick(10 * kS);
  for (int period = 0; period < 2; period++) {
    allToAllPeriod(own, 2, (10 + period) * kS);
    allToAllPeriod(others, 2, (10 + period) * kS);
    std::vector<PeerSummary> remote;
    ASSERT_TRUE(summariesFromJson(summariesToJson(summarize(others)), &remote, &why)) << why;
    leader.addRemoteSummaries(std::move(remote));
    leader.tick((11 + period) * kS);
  }
  ASSERT_EQ(leader.activeFindings().size(), 1u);
  EXPECT_EQ(leader.activeFindings()[0].rank, 2);
}

TEST(DiagnoseSettings, ParametersAndTheirBounds) {
  icn::testing::setEnvAndReload("ICN_HANG_REPORT_S", nullptr);
  icn::testing::setEnvAndReload("ICN_STRAGGLER_REPORT_S", nullptr);
  icn::testing::setEnvAndReload("ICN_STRAGGLER_LATE_US", nullptr);
  Settings s = settingsFromParams();
  EXPECT_EQ(s.hangReportS, 20);
  EXPECT_EQ(s.stragglerPeriodS, 10);
  EXPECT_NEAR(s.detector.lateFloorS, 500e-6, 1e-12);
  EXPECT_NEAR(s.detector.minTimedGapS, 80e-6, 1e-12);
  EXPECT_TRUE(s.reportDir.empty());
  icn::testing::setEnvAndReload("ICN_HANG_REPORT_S", "999999");
  icn::testing::setEnvAndReload("ICN_STRAGGLER_REPORT_S", "-5");
  icn::testing::setEnvAndReload("ICN_STRAGGLER_LATE_US", "1");
  s = settingsFromParams();  // out of their bounds: refused (params.def), the defaults stand
  EXPECT_EQ(s.hangReportS, 20);
  EXPECT_EQ(s.stragglerPeriodS, 10);
  EXPECT_NEAR(s.detector.lateFloorS, 500e-6, 1e-12);
  icn::testing::setEnvAndReload("ICN_HANG_REPORT_S", "0");
  icn::testing::setEnvAndReload("ICN_STRAGGLER_REPORT_S", "0");
  icn::testing::setEnvAndReload("ICN_STRAGGLER_LATE_US", "50");
  icn::testing::setEnvAndReload("ICN_STRAGGLER_LINK_GAP_US", "0");
  s = settingsFromParams();
  EXPECT_EQ(s.hangReportS, 0);
  EXPECT_EQ(s.stragglerPeriodS, 0);
  EXPECT_NEAR(s.detector.lateFloorS, 50e-6, 1e-12);
  EXPECT_EQ(s.detector.minTimedGapS, 0);
  icn::testing::setEnvAndReload("ICN_STRAGGLER_LINK_GAP_US", nullptr);
  icn::testing::setEnvAndReload("ICN_HANG_REPORT_S", nullptr);
  icn::testing::setEnvAndReload("ICN_STRAGGLER_REPORT_S", nullptr);
  icn::testing::setEnvAndReload("ICN_STRAGGLER_LATE_US", nullptr);
}

// The first watched connection starts the tick thread; it stays for later connections (a job opens and closes
// communicators) and is joined at exit or unload.
TEST(DiagnoseWatch, TickThreadStartsWithTheFirstWatchedConnectionAndStays) {
  EXPECT_FALSE(icn::diagnose::tickThreadRunning());
  {
    icn::diagnose::LinkInfo a, b;
    a.dir = icn::diagnose::Dir::Send;
    b.dir = icn::diagnose::Dir::Recv;
    auto first = std::make_unique<icn::diagnose::ConnectionWatch>(a);
    EXPECT_TRUE(icn::diagnose::tickThreadRunning());
    icn::diagnose::ConnectionWatch second(b);
    EXPECT_EQ(icn::diagnose::links::all().size(), 2u);
    first.reset();
    EXPECT_EQ(icn::diagnose::links::all().size(), 1u);
  }
  EXPECT_TRUE(icn::diagnose::links::all().empty()) << "a closed connection stayed in the registry";
  EXPECT_TRUE(icn::diagnose::tickThreadRunning());
  icn::diagnose::stopTickThreadForTesting();
  EXPECT_FALSE(icn::diagnose::tickThreadRunning());
}

namespace {

// A child process with the tick thread running for 2 s reports the stall it measured; the parent stops it 20 ms of
// every 30 ms for 1.5 s when `stopped`.
uint64_t childStallNs(bool stopped) {
  int ready[2], result[2];
  if (pipe(ready) != 0 || pipe(result) != 0) return ~uint64_t{0};
  const pid_t pid = fork();
  if (pid == 0) {
    icn::diagnose::stopTickThreadForTesting();  // the parent's thread is not the child's
    icn::diagnose::LinkInfo a;
    icn::diagnose::ConnectionWatch watch(a);
    const uint64_t base = icn::diagnose::diagnoser().stalledNs();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    (void)!write(ready[1], "r", 1);
    while (std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const uint64_t stalled = icn::diagnose::diagnoser().stalledNs() - base;
    (void)!write(result[1], &stalled, sizeof stalled);
    _exit(0);
  }
  char c;
  EXPECT_EQ(read(ready[0], &c, 1), 1);
  if (stopped) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < end) {
      kill(pid, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      kill(pid, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  uint64_t stalled = ~uint64_t{0};
  EXPECT_EQ(read(result[0], &stalled, sizeof stalled), static_cast<ssize_t>(sizeof stalled));
  int status = 0;
  waitpid(pid, &status, 0);
  for (int fd : {ready[0], ready[1], result[0], result[1]}) close(fd);
  return stalled;
}

}  // namespace

// The tick thread counts the time the process did not run when it should have: stopped two thirds of 1.5 s (1 s),
// the thread misses its wake-ups by about a third of that; running freely, by next to nothing.
TEST(DiagnoseWatch, TickThreadMeasuresTheTimeTheProcessWasStopped) {
  const uint64_t free = childStallNs(false), stopped = childStallNs(true);
  std::printf("stalled: free %.0f ms, stopped %.0f ms\n", free / 1e6, stopped / 1e6);
  EXPECT_LT(free, 150 * kMs);
  EXPECT_GT(stopped, 250 * kMs);
  EXPECT_LT(stopped, 1100 * kMs);
}
