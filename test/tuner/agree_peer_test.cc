// Hostile members against a real agreement leader (its service thread, TCP on loopback). They know the rendezvous
// secret (they read the leader's file, as any process of the user can) and lie with every message a follower may
// send. The leader names each liar in a WARN, stops the agreement at the first call no rank can have passed (0
// before START, the horizon it announced + 1 after), never lets a claim move a decision already announced, and a
// flood of idle connections does not keep a follower out.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <mutex>
#include <thread>

#include "agree_hostile.h"
#include "core/log.h"
#include "diagnose/registry.h"
#include "diagnose/service.h"
#include "tuner/agree/service.h"

namespace icn::tuner {
namespace {

using namespace agree;
using hostile::Wire;

std::mutex g_logMu;
std::vector<std::string> g_warns;

void captureWarns(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != static_cast<int>(LogLevel::Warn)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_logMu);
  g_warns.emplace_back(buf);
}

// A WARN holding every one of `parts`.
bool warned(std::initializer_list<std::string> parts) {
  std::lock_guard<std::mutex> lock(g_logMu);
  for (const std::string& w : g_warns) {
    bool all = true;
    for (const std::string& p : parts) all = all && w.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

std::string warnings() {
  std::lock_guard<std::mutex> lock(g_logMu);
  std::string s;
  for (const std::string& w : g_warns) s += "  " + w + "\n";
  return s;
}

template <typename F>
bool eventually(F ready, int ms = 2000) {
  auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A leader of an `nRanks`-rank communicator holding rank 0 alone, past its first call.
class HostileFollower : public ::testing::Test {
 protected:
  void SetUp() override { startLeader(2); }
  void startLeader(int nRanks) {
    if (leader_) detach(leader_.get());
    setLogSink(&captureWarns);
    {
      std::lock_guard<std::mutex> lock(g_logMu);
      g_warns.clear();
    }
    if (dir_.empty()) {
      char t[] = "/tmp/icn-agree-peer-XXXXXX";
      ASSERT_NE(mkdtemp(t), nullptr);
      dir_ = t;
    }
    setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1);
    setenv("ICN_SOCKET_IFNAME", "lo", 1);
    unsetenv("ICN_TUNER_RENDEZVOUS");
    nRanks_ = nRanks;
    commId_ = 0x5eed0000u + static_cast<uint64_t>(getpid()) * 16 + static_cast<uint64_t>(nRanks);
    leader_ = std::make_shared<Agreement>(commId_, nRanks, Agreement::Role::Leader, AgreeParams{});
    leader_->noteRank(0);
    std::string why;
    ASSERT_TRUE(attach(leader_, 1, &why)) << why;
    EXPECT_EQ(leader_->gate(0, 1), Agreement::Gate::Untuned);  // one local rank: START needs the followers'
    ASSERT_TRUE(hostile::readRendezvous(hostile::rendezvousFile(dir_, commId_, nRanks), &addr_, &token_));
  }
  void TearDown() override {
    if (leader_) detach(leader_.get());
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // A member that connected and proved the secret.
  std::unique_ptr<Wire> join() {
    auto w = std::make_unique<Wire>();
    EXPECT_TRUE(w->connectTo(addr_));
    EXPECT_TRUE(w->prove(token_, commId_, nRanks_));
    return w;
  }
  // A member holding `ranks` that got START (the leader's stream from there on is read by the caller).
  std::unique_ptr<Wire> joinAndStart(const std::vector<int>& ranks, hostile::Start* start = nullptr) {
    auto w = join();
    EXPECT_TRUE(w->send(kMembers, hostile::members(ranks)));
    std::string p;
    EXPECT_TRUE(w->awaitFrame(kStart, &p)) << warnings();
    hostile::Start s;
    EXPECT_TRUE(hostile::parseStart(p, &s));
    if (start) *start = s;
    EXPECT_TRUE(eventually([&] { return leader_->start() != Agreement::kNever; }));
    EXPECT_FALSE(leader_->frozen()) << warnings();
    return w;
  }
  // The leader stopped at `at`, warned about `liar` (saying `what`), and closed the liar's connection.
  void expectStoppedAt(uint64_t at, Wire& liar, const std::string& what, bool dropped = true) {
    ASSERT_TRUE(eventually([&] { return leader_->frozen(); })) << warnings();
    EXPECT_EQ(leader_->frozenFrom(), at);
    EXPECT_FALSE(leader_->frozenQuietly()) << "a lie is a WARN, not a normal end";
    EXPECT_TRUE(eventually([&] { return warned({liar.name(), what}); }))
        << "no WARN naming " << liar.name() << " and \"" << what << "\":\n" << warnings();
    if (dropped) {
      EXPECT_TRUE(liar.closedWithin(2000)) << "the leader dropped the liar";
    }
  }

  std::string dir_, addr_;
  Token token_{};
  uint64_t commId_ = 0;
  int nRanks_ = 2;
  std::shared_ptr<Agreement> leader_;
};

// ---- MEMBERS ----

TEST_F(HostileFollower, ClaimingTheLeadersRankIsALieBeforeStart) {
  auto liar = join();
  liar->send(kMembers, hostile::members({0}));
  expectStoppedAt(0, *liar, "claims rank 0, which this process (the leader) holds", false);
  EXPECT_EQ(leader_->start(), Agreement::kNever) << "nobody ever runs a tuned call";
}

TEST_F(HostileFollower, ClaimingARankOutsideTheCommunicatorIsALie) {
  auto liar = join();
  liar->send(kMembers, hostile::members({1, 2}));
  expectStoppedAt(0, *liar, "claims rank 2 of a communicator of 2 ranks", false);
}

TEST_F(HostileFollower, ClaimingARankTwiceInOneMessageIsALie) {
  auto liar = join();
  liar->send(kMembers, hostile::members({1, 1}));
  expectStoppedAt(0, *liar, "malformed MEMBERS");
}

TEST_F(HostileFollower, SecondMembersIsALie) {
  startLeader(3);
  auto liar = join();
  liar->send(kMembers, hostile::members({2}));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(leader_->frozen());
  liar->send(kMembers, hostile::members({1}));
  expectStoppedAt(0, *liar, "reported its ranks a second time");
}

// Two processes claim rank 1 before START: one of them lies, the leader cannot tell which, and never starts.
TEST_F(HostileFollower, RankClaimedByTwoProcessesStopsBeforeStart) {
  startLeader(4);
  auto liar = join();
  liar->send(kMembers, hostile::members({1}));
  auto honest = join();
  honest->send(kMembers, hostile::members({1}));
  expectStoppedAt(0, *honest, "claims rank 1, which follower " + liar->name() + " claimed first", false);
  auto third = join();
  third->send(kMembers, hostile::members({2}));
  std::string p;
  EXPECT_TRUE(third->awaitFrame(kFreeze, &p)) << "a process joining after the stop hears of it";
  EXPECT_EQ(leader_->start(), Agreement::kNever);
}

// The liar claims the honest follower's rank and gets START; the honest follower, joining after it, gets START and
// the horizons announced so far, then the stop at the announced horizon + 1: it makes the leader's choices.
TEST_F(HostileFollower, LateJoinerGetsEverythingAnnouncedThenTheStop) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  auto honest = join();
  std::string p;
  ASSERT_TRUE(honest->awaitFrame(kStart, &p)) << "the late joiner gets START";
  hostile::Start got;
  ASSERT_TRUE(hostile::parseStart(p, &got));
  EXPECT_EQ(got.s, st.s);
  EXPECT_EQ(got.h, st.h);
  ASSERT_TRUE(honest->awaitFrame(kFreeze, &p));
  Reader r{reinterpret_cast<const uint8_t*>(p.data()), p.size()};
  EXPECT_EQ(r.u64(), st.h + 1) << "the stop lies past every horizon announced";
  EXPECT_EQ(leader_->frozenFrom(), st.h + 1);
  EXPECT_TRUE(warned({honest->name(), "joined after START"})) << warnings();
  honest->send(kMembers, hostile::members({1}));
  EXPECT_TRUE(eventually([&] {
    return warned({honest->name(), "claims rank 1, which follower " + liar->name() + " claimed first"});
  })) << warnings();
}

TEST_F(HostileFollower, MoreProcessesThanRanksIsALie) {
  auto a = join();
  Wire b;  // a 2-rank communicator has one follower process at most
  ASSERT_TRUE(b.connectTo(addr_));
  EXPECT_FALSE(b.prove(token_, commId_, nRanks_)) << "dropped as it joins";
  ASSERT_TRUE(eventually([&] { return leader_->frozen(); }));
  EXPECT_EQ(leader_->frozenFrom(), 0u);
  EXPECT_TRUE(warned({b.name(), "more processes than ranks"})) << warnings();
}

// ---- REPORT ----

TEST_F(HostileFollower, ReportBeforeItsRanksIsALie) {
  auto liar = join();
  liar->send(kReport, hostile::report(4, 20, 3));
  expectStoppedAt(0, *liar, "reported measurements before its ranks");
}

TEST_F(HostileFollower, ReportBeforeStartIsALie) {
  startLeader(3);
  auto liar = join();
  liar->send(kMembers, hostile::members({1}));
  liar->send(kReport, hostile::report(4, 20, 3));
  expectStoppedAt(0, *liar, "before START");
}

TEST_F(HostileFollower, ReportWithMoreSamplesThanCallsIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kReport, hostile::report(4, 20, 20, 10, 60000));  // 1.2M samples in ~2048 calls
  expectStoppedAt(st.h + 1, *liar, "samples of AllReduce 2^20 B, more than its 1 ranks can have taken");
}

TEST_F(HostileFollower, ReportForABucketOutOfRangeIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kReport, hostile::report(4, coll::kNumBuckets, 2));
  expectStoppedAt(st.h + 1, *liar, "malformed REPORT");
}

TEST_F(HostileFollower, ReportWithMoreArmsThanAnyPlanIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kReport, hostile::report(4, 20, BucketExplorer::kMaxArms + 1));
  expectStoppedAt(st.h + 1, *liar, "malformed REPORT");
}

TEST_F(HostileFollower, ReportNamingAnArmTwiceIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kReport, hostile::report(4, 20, 3, 10, 4, true));
  expectStoppedAt(st.h + 1, *liar, "malformed REPORT");
}

TEST_F(HostileFollower, SecondReportOfABucketIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kReport, hostile::report(4, 20, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(leader_->frozen()) << "one report per bucket is the protocol";
  liar->send(kReport, hostile::report(4, 20, 3));
  expectStoppedAt(st.h + 1, *liar, "reported AllReduce 2^20 B a second time");
}

// ---- DROP ----

// A follower that says it froze long ago cannot pull the stop back over calls the others may have run with what
// was announced: the leader stops at the horizon it announced + 1, and says the claimant may differ.
TEST_F(HostileFollower, DropShortOfTheHorizonCannotMoveTheStopBack) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kDrop, hostile::u64(st.s));
  ASSERT_TRUE(eventually([&] { return leader_->frozen(); })) << warnings();
  EXPECT_EQ(leader_->frozenFrom(), st.h + 1) << "not " << st.s + 1;
  EXPECT_TRUE(warned({liar->name(), "its choices may differ"})) << warnings();
}

TEST_F(HostileFollower, DropAtAHorizonNeverAnnouncedIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kDrop, hostile::u64(st.h + 5000));
  expectStoppedAt(st.h + 1, *liar, "beyond any announced");
}

TEST_F(HostileFollower, MembersAfterDropIsALie) {
  startLeader(3);
  auto liar = join();
  liar->send(kDrop, hostile::u64(Agreement::kNever));  // gave up before START: the leader stops at 0
  liar->send(kMembers, hostile::members({1}));
  expectStoppedAt(0, *liar, "after it gave up");
}

// ---- CONTESTED ----

// A follower passing on the registry's word that two processes claim rank 0: the leader stops before START (a
// follower may have been led elsewhere) and names who said it.
TEST_F(HostileFollower, ContestedFromAFollowerStopsBeforeStart) {
  startLeader(3);
  auto member = join();
  member->send(kMembers, hostile::members({1}));
  member->send(kContested);
  expectStoppedAt(0, *member, "two claims of rank 0", false);
  EXPECT_EQ(leader_->start(), Agreement::kNever);
}

// ---- frames only the leader sends, or out of order ----

TEST_F(HostileFollower, LeaderFramesFromAFollowerAreLies) {
  for (uint8_t type : {kStart, kHorizon, kFreeze, kHello, kFound}) {
    SCOPED_TRACE(static_cast<int>(type));
    startLeader(2);
    hostile::Start st;
    auto liar = joinAndStart({1}, &st);
    liar->send(type, hostile::u64(st.h + 1) + hostile::u64(st.h + 2) + std::string(4, '\0'));
    expectStoppedAt(st.h + 1, *liar, "out of order");
  }
}

TEST_F(HostileFollower, FrameLongerThanTheLimitIsRefusedBeforeItArrives) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  Writer w;
  w.u32(kMagic);
  w.u8(kReport);
  w.u8(0), w.u8(0), w.u8(0);
  w.u32(0xFFFFFFF0u);  // a length the leader would have to buffer
  liar->sendRaw(w.b);
  ASSERT_TRUE(eventually([&] { return leader_->frozen(); }));
  EXPECT_EQ(leader_->frozenFrom(), st.h + 1);
  EXPECT_TRUE(warned({liar->name(), "malformed frame"})) << warnings();
  EXPECT_TRUE(liar->closedWithin(2000));
}

// ---- flood ----

// 600 idle connections (more than the leader keeps unproven, all from this host's address as an honest follower's
// are) do not keep a follower out: the oldest unproven ones make room, and the WARN names the source and a count.
TEST_F(HostileFollower, FloodOfIdleConnectionsDoesNotKeepAFollowerOut) {
  auto flood = hostile::idleConnections(addr_, 600);
  ASSERT_GE(flood.size(), 500u);
  std::this_thread::sleep_for(kFloodGrace + std::chrono::milliseconds(50));  // past a handshake's time
  hostile::Start st;
  auto follower = joinAndStart({1}, &st);
  EXPECT_GE(st.s, AgreeParams{}.window);
  EXPECT_TRUE(eventually([&] { return warned({"127.0.0.1: ", "floods the agreement port"}); })) << warnings();
}


// ---- DIAG: the diagnosis's gathering ----

namespace diag {

using diagnose::Dir;
using diagnose::PeerSummary;

PeerSummary summary(uint64_t commId, int rank, int peerRank) {
  PeerSummary s;
  s.commId = commId;
  s.rank = rank;
  s.peerRank = peerRank;
  s.dir = Dir::Recv;
  s.host = "host" + std::to_string(rank);
  s.peerHost = "host" + std::to_string(peerRank);
  s.links = 1;
  return s;
}

// DIAG frames carrying `text` in chunks of at most `chunk` bytes.
bool sendText(Wire& w, uint8_t kind, const std::string& text, size_t chunk = kMaxPayload - 2) {
  size_t off = 0;
  do {
    size_t n = std::min(chunk, text.size() - off);
    if (!w.send(kDiag, diagPayload(kind, off + n == text.size(), text.data() + off, n))) return false;
    off += n;
  } while (off < text.size());
  return true;
}

std::string waitReport(uint64_t commId, int rank, int peerRank, int pid) {
  diagnose::ProcessReport r;
  r.host = "host" + std::to_string(rank);
  r.pid = pid;
  r.timeUnixMs = 1767225600000;
  r.noProgressS = 25;
  r.reportAfterS = 20;
  r.ranks.push_back(diagnose::RankEntry{commId, rank, 2, "10.0.0.2"});
  diagnose::WaitEntry w;
  w.commId = commId;
  w.rank = rank;
  w.peerRank = peerRank;
  w.dir = Dir::Recv;
  w.tag = 7;
  w.bytes = 4096;
  w.postedS = w.progressS = 25;
  r.waits.push_back(w);
  return diagnose::toJson(r);
}

}  // namespace diag

// Summaries in several frames are one message: the leader's diagnoser gets each of them, and a follower that
// sends them more than three times a period has the extra ones dropped unread (a WARN, no stop).
TEST_F(HostileFollower, DiagnosisSummariesReachTheLeadersDiagnoserAndAFloodIsCut) {
  auto w = joinAndStart({1});
  diagnose::Diagnoser& d = diagnose::diagnoser();
  const uint64_t before = d.remoteSummariesTaken();
  std::vector<diagnose::PeerSummary> two = {diag::summary(commId_, 1, 0), diag::summary(commId_, 1, 0)};
  two[1].dir = diagnose::Dir::Send;
  const std::string text = diagnose::summariesToJson(two);
  ASSERT_TRUE(diag::sendText(*w, kDiagSummaries, text, text.size() / 3));
  ASSERT_TRUE(eventually([&] { return d.remoteSummariesTaken() == before + 2; })) << warnings();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(diag::sendText(*w, kDiagSummaries, text));
  EXPECT_TRUE(eventually([&] { return warned({w->name(), "more than 3 times a period"}); })) << warnings();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(d.remoteSummariesTaken(), before + 6) << "three messages a period are read, the rest dropped";
  EXPECT_FALSE(leader_->frozen()) << warnings();
}

TEST_F(HostileFollower, DiagnosisSummariesOfARankItDoesNotHoldAreALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  diag::sendText(*liar, kDiagSummaries, diagnose::summariesToJson({diag::summary(commId_, 0, 1)}));
  expectStoppedAt(st.h + 1, *liar, "straggler summaries of rank 0, which it does not hold");
}

TEST_F(HostileFollower, DiagnosisSummariesOfAnotherCommunicatorAreALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  diag::sendText(*liar, kDiagSummaries, diagnose::summariesToJson({diag::summary(commId_ + 1, 1, 0)}));
  expectStoppedAt(st.h + 1, *liar, "of another communicator");
}

TEST_F(HostileFollower, UnreadableDiagnosisIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  diag::sendText(*liar, kDiagSummaries, "[{\"commId\":");
  expectStoppedAt(st.h + 1, *liar, "unreadable straggler summaries");
}

TEST_F(HostileFollower, DiagnosisMessageOverItsBoundIsALieBeforeItIsKept) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  const std::string chunk(kMaxPayload - 2, ' ');
  // Never the last: the leader must not keep more than kMaxDiagText of it.
  const std::string p = diagPayload(kDiagSummaries, false, chunk.data(), chunk.size());
  for (size_t sent = 0; sent <= kMaxDiagText; sent += chunk.size())
    if (!liar->send(kDiag, p)) break;
  expectStoppedAt(st.h + 1, *liar, "diagnosis message over 524288 bytes");
}

TEST_F(HostileFollower, InterleavedDiagnosisMessagesAreALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  liar->send(kDiag, diagPayload(kDiagSummaries, false, "[{", 2));
  diag::sendText(*liar, kDiagReport, diag::waitReport(commId_, 1, 0, 4242));
  expectStoppedAt(st.h + 1, *liar, "interleaved two diagnosis messages");
}

TEST_F(HostileFollower, HangReportsOfTwoProcessesFromOneFollowerAreALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  ASSERT_TRUE(diag::sendText(*liar, kDiagReport, diag::waitReport(commId_, 1, 0, 4242)));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(leader_->frozen()) << warnings();
  diag::sendText(*liar, kDiagReport, diag::waitReport(commId_, 1, 0, 4243));
  expectStoppedAt(st.h + 1, *liar, "hang reports of two processes");
}

TEST_F(HostileFollower, HangReportOfARankItDoesNotHoldIsALie) {
  hostile::Start st;
  auto liar = joinAndStart({1}, &st);
  diag::sendText(*liar, kDiagReport, diag::waitReport(commId_, 0, 1, 4242));
  expectStoppedAt(st.h + 1, *liar, "hang report of rank 0, which it does not hold");
}

// An honest follower of this process (the service carries both roles): once its straggler period ends, its
// summaries reach the leader; once it stalls, its hang report does, and the leader's analysis names the rank its
// pending receive waits on.
TEST_F(HostileFollower, AFollowersSummariesAndHangReportReachTheLeaderAndNameTheRoot) {
  diagnose::Diagnoser& d = diagnose::diagnoser();
  ASSERT_GT(d.settings().stragglerPeriodS, 0);
  ASSERT_GT(d.settings().hangReportS, 0);
  auto follower = std::make_shared<Agreement>(commId_, 2, Agreement::Role::Follower, AgreeParams{});
  follower->noteRank(1);
  std::string why;
  ASSERT_TRUE(attach(follower, 1, &why)) << why;
  EXPECT_EQ(follower->gate(0, 1), Agreement::Gate::Untuned);  // its first call: it reports its ranks now
  ASSERT_TRUE(eventually([&] { return leader_->start() != Agreement::kNever; })) << warnings();

  diagnose::links::setCommSize(commId_, 1, 2);
  auto m = diagnose::links::open(diagnose::LinkInfo{commId_, 1, 0, "hostB", "10.0.0.2", "hostA", "10.0.0.1",
                                                    diagnose::Dir::Recv});
  const uint64_t t0 = diagnose::nowNs();
  for (int i = 0; i < 16; ++i) {
    const uint64_t t = t0 + static_cast<uint64_t>(i) * 1000000;
    auto op = m->onRecvPosted(i, 1 << 20, t);
    m->onFirstByte(op, t + 200000);
    m->onRecvDone(op, 1 << 20, t + 600000);
  }
  m->onRecvPosted(99, 4096, t0 + 20000000);  // never arrives
  const uint64_t before = d.remoteSummariesTaken();
  const uint64_t period = static_cast<uint64_t>(d.settings().stragglerPeriodS * 1e9);
  d.tick(t0 + 30000000);                 // the first period starts
  d.tick(t0 + 30000000 + period + 1);    // and ends: the follower sends its summaries
  EXPECT_TRUE(eventually([&] { return d.remoteSummariesTaken() > before; })) << warnings();

  const uint64_t stall = t0 + 20000000 + static_cast<uint64_t>(d.settings().hangReportS * 1e9) + period + 1;
  d.tick(stall);  // no progress for longer than ICN_HANG_REPORT_S: the follower's report goes to the leader
  bool named = eventually([&] {
    d.tick(stall + 1000);
    for (const diagnose::HangAnalysis& a : d.lastAnalysis())
      if (a.commId == commId_ && std::find(a.roots.begin(), a.roots.end(), 0) != a.roots.end()) return true;
    return false;
  });
  EXPECT_TRUE(named) << warnings();
  diagnose::links::close(m);
  detach(follower.get());
}

}  // namespace
}  // namespace icn::tuner
