// The tuner across processes with a hostile member: this (the test's) process holds the rendezvous secret, as any
// process of the user does (it reads the leader's file) or any holder of the job key (tcp://), and lies to the
// leader. The honest ranks' processes (children of this binary, see multiproc_harness.h) must make the same choice
// for every call whatever it says, and the leader names it in a WARN.
#include "multiproc_harness.h"

using namespace icn::tunertest;


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
