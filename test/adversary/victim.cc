#include "victim.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>

#include <cstring>
#include <sstream>
#include <thread>

namespace icn::adversary {
namespace {
using Clock = std::chrono::steady_clock;
constexpr uint8_t kGuardByte = 0x5A;
constexpr auto kVictimLimit = std::chrono::seconds(60);
int g_repostCap = 0;

ncclResult_t postReceive(Rank& r, VictimConn& c) {
  void* d = c.data();
  size_t sz = kPosted;
  int tag = kTag;
  return r.plugin.net->irecv(c.comm, 1, &d, &sz, &tag, nullptr, nullptr, &c.req);
}
}  // namespace

void victimReposts(int cap) { g_repostCap = cap; }

bool VictimConn::guardsIntact() const {
  for (size_t i = 0; i < kGuard; i++)
    if (buf[i] != kGuardByte || buf[kGuard + kPosted + i] != kGuardByte) return false;
  return true;
}

std::vector<VictimConn*> VictimReport::hostile() {
  std::vector<VictimConn*> out;
  for (auto& c : conns)
    if (!c.holdsHonestPattern()) out.push_back(&c);
  return out;
}

bool VictimConn::holdsHonestPattern() const {
  return result == ncclSuccess && got == int(kHonestBytes) &&
         netapi::checkPattern(buf.data() + kGuard, kHonestBytes, kHonestSeed) == SIZE_MAX;
}

void victimBody(Rank& r, size_t expectComms, const std::function<void(VictimReport&)>& check) {
  static Canary canary;  // static: the same address for the whole process, far from the receive buffers
  canary.arm();
  if (const char* n = getenv(kVictimNofileVar)) {
    rlimit lim{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
    lim.rlim_cur = std::min<rlim_t>(rlim_t(atol(n)), lim.rlim_max);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  }
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* l = nullptr;
  ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
  VictimInfo info{getpid(), reinterpret_cast<uint64_t>(canary.secret), reinterpret_cast<uint64_t>(&canary.doneWord)};
  ASSERT_TRUE(r.peer.send(handle, sizeof handle));
  ASSERT_TRUE(r.peer.send(&info, sizeof info));
  VictimReport rep;
  rep.conns.reserve(16);
  const long rssAtStart = testpair::rssKiB();
  rep.baseFds = rep.maxFds = testpair::openFds();
  bool attackerDone = false;
  auto deadline = Clock::now() + kVictimLimit;
  for (unsigned round = 0;; round++) {
    if (round % 4 == 0) rep.maxFds = std::max(rep.maxFds, testpair::openFds());
    void* rc = nullptr;
    if (r.plugin.net->accept(l, &rc, nullptr) != ncclSuccess) rep.acceptAlwaysOk = false;
    if (rc) {
      VictimConn& c = rep.conns.emplace_back();
      c.comm = rc;
      c.buf.assign(kPosted + 2 * kGuard, kGuardByte);
      c.result = postReceive(r, c);
      c.finished = c.result != ncclSuccess;
    }
    bool allFinished = true;
    for (auto& c : rep.conns) {
      if (c.finished) continue;
      int done = 0, sizes[8] = {};
      c.result = r.plugin.net->test(c.req, &done, sizes);
      if (c.result != ncclSuccess || done) {
        c.finished = true;
        c.got = sizes[0];
        if (c.result == ncclSuccess && !c.holdsHonestPattern() && ++c.completed < g_repostCap) {
          c.result = postReceive(r, c);
          c.finished = c.result != ncclSuccess;
        }
      }
      allFinished = allFinished && c.finished;
    }
    pollfd p{r.peer.fd(), POLLIN, 0};
    if (!attackerDone && ::poll(&p, 1, 0) == 1) {
      char b = 0;
      ASSERT_TRUE(r.peer.recv(&b, 1));
      attackerDone = true;
    }
    if (attackerDone && allFinished && rep.conns.size() >= expectComms) break;
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "victim: " << rep.conns.size() << " of " << expectComms << " connections, attacker "
                    << (attackerDone ? "done" : "not done") << ", receives " << (allFinished ? "" : "not ")
                    << "finished within " << kVictimLimit.count() << " s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  rep.rssGrowthKiB = testpair::rssKiB() - rssAtStart;
  rep.canaryIntact = canary.intact();
  EXPECT_TRUE(rep.acceptAlwaysOk) << "accept() failed because of a hostile peer";
  EXPECT_TRUE(rep.canaryIntact) << "the victim's canary (secret or completion word) changed";
  EXPECT_EQ(rep.conns.size(), expectComms) << "connections that completed the handshake";
  for (auto& c : rep.conns) EXPECT_TRUE(c.guardsIntact()) << "bytes written outside a posted receive";
  size_t honest = 0;
  for (auto& c : rep.conns) honest += c.holdsHonestPattern();
  EXPECT_EQ(honest, 1u) << "the honest connection's data did not arrive intact";
  check(rep);
  char b = 'x';
  ASSERT_TRUE(r.peer.send(&b, 1));  // rank 1 may now close
  ASSERT_TRUE(r.peer.recv(&b, 1));
  for (auto& c : rep.conns) r.plugin.net->closeRecv(c.comm);
  EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
}

namespace {
std::function<void()> g_afterVictim;
Ms g_honestWithin{0};
}  // namespace

void afterVictim(std::function<void()> f) { g_afterVictim = std::move(f); }
void honestConnectWithin(Ms limit) { g_honestWithin = limit; }

void attackerBody(Rank& r, const std::function<void(const SockAddr&, const VictimInfo&)>& attack) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  VictimInfo info;
  ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
  ASSERT_TRUE(r.peer.recv(&info, sizeof info));
  SockAddr addr = listenAddress(handle);
  ASSERT_NE(addr.len, 0u) << "cannot read the victim's listen handle";
  attack(addr, info);
  void* s = nullptr;
  const auto start = Clock::now();
  const ncclResult_t connected = netapi::connectBlocking(r.plugin, 0, handle, &s, std::chrono::seconds(g_honestWithin.count() > 0 ? 10 : 30));
  const auto took = std::chrono::duration_cast<Ms>(Clock::now() - start);
  fprintf(stderr, "adversary: the honest connect took %lld ms\n", static_cast<long long>(took.count()));
  ASSERT_EQ(connected, ncclSuccess) << "the honest connection failed while the listener was under attack";
  ASSERT_NE(s, nullptr);
  if (g_honestWithin.count() > 0) {
    EXPECT_LE(took, g_honestWithin) << "the honest rank connected only after " << took.count() << " ms";
  }
  std::vector<uint8_t> msg(kHonestBytes);
  netapi::fillPattern(msg.data(), msg.size(), kHonestSeed);
  void* req = nullptr;
  while (!req) ASSERT_EQ(r.plugin.net->isend(s, msg.data(), msg.size(), kTag, nullptr, nullptr, &req), ncclSuccess);
  char b = 'D';
  ASSERT_TRUE(r.peer.send(&b, 1));
  EXPECT_EQ(netapi::waitRequest(r.plugin, req, nullptr, std::chrono::seconds(30)), ncclSuccess);
  ASSERT_TRUE(r.peer.recv(&b, 1, std::chrono::seconds(90)));
  if (g_afterVictim) g_afterVictim();
  EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
  ASSERT_TRUE(r.peer.send(&b, 1));
}

size_t AttackOutcome::victimWarnCount(const std::vector<std::string>& needles) const {
  if (hostileAddress.empty()) return 0;
  std::istringstream in(ranks[0].log);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (line.find("WARN") == std::string::npos || line.find(hostileAddress + ":") == std::string::npos) continue;
    bool all = true;
    for (auto& w : needles) all = all && line.find(w) != std::string::npos;
    n += all;
  }
  return n;
}

std::string announcedHostileAddress(const std::string& rank1Log) {
  const std::string announce = "adversary: hostile connection from ";
  size_t at = rank1Log.find(announce);
  if (at == std::string::npos) return "";
  at += announce.size();
  return rank1Log.substr(at, rank1Log.find('\n', at) - at);
}

namespace {
std::array<RankSetup, 2> rankSetups(std::vector<std::pair<std::string, std::string>> env,
                                    const std::vector<std::pair<std::string, std::string>>& victimOnly) {
  std::array<RankSetup, 2> setup;
  const std::string t = getenv("ICN_TRANSPORT") ? getenv("ICN_TRANSPORT") : "";
  std::string transport = t == "tcp" || t == "ib" ? t : "ucx";
  env.insert(env.begin(), {{"ICN_TRANSPORT", transport}, {"UCX_TLS", "tcp"}, {"UCX_WARN_UNUSED_ENV_VARS", "n"}});
  for (auto& s : setup) s.env = env;
  for (auto& kv : victimOnly) setup[0].env.push_back(kv);
  return setup;
}

AttackOutcome outcomeOf(std::array<RankOutcome, 2> ranks) {
  AttackOutcome out;
  out.ranks = std::move(ranks);
  EXPECT_TRUE(out[0].cleanExit()) << "the victim crashed, hung or failed a check";
  EXPECT_TRUE(out[1].cleanExit()) << "the attacker rank failed a check";
  out.hostileAddress = announcedHostileAddress(out[1].log);
  EXPECT_FALSE(out.hostileAddress.empty()) << "rank 1 opened no hostile connection";
  return out;
}

void connectingVictim(Rank& r, Ms limit, const std::function<void(const ConnectReport&)>& check) {
  std::array<uint8_t, kHandleSize> handle{};
  ASSERT_TRUE(r.peer.recv(handle.data(), handle.size()));
  ConnectReport rep;
  const long rss0 = testpair::rssKiB();
  long rssMax = rss0;
  const auto start = Clock::now();
  ncclNetDeviceHandle_v11_t* devHandle = nullptr;
  void* comm = nullptr;
  while (Clock::now() - start < limit) {
    rep.result = r.plugin.net->connect(r.plugin.ctx, 0, handle.data(), &comm, &devHandle);
    rssMax = std::max(rssMax, testpair::rssKiB());
    if (rep.result != ncclSuccess || comm) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  rep.took = std::chrono::duration_cast<Ms>(Clock::now() - start);
  rep.gotComm = comm != nullptr;
  rep.rssGrowthKiB = rssMax - rss0;
  fprintf(stderr, "adversary: the victim's connect ended after %lld ms (result %d), resident memory +%ld KiB\n",
          static_cast<long long>(rep.took.count()), int(rep.result), rep.rssGrowthKiB);
  char b = 'D';
  ASSERT_TRUE(r.peer.send(&b, 1));  // the hostile rank may stop
  check(rep);
  ASSERT_TRUE(r.peer.recv(&b, 1, std::chrono::seconds(30)));
  if (comm) r.plugin.net->closeSend(comm);
}

void hostileListenerRank(Rank& r, const HostileBody& hostile) {
  raiseDescriptorLimit();
  HostileListener l;
  ASSERT_TRUE(l.ok()) << "cannot listen";
  auto handle = l.handle();
  ASSERT_TRUE(r.peer.send(handle.data(), handle.size()));
  bool victimDone = false;
  auto stop = [&] {
    pollfd p{r.peer.fd(), POLLIN, 0};
    if (!victimDone && ::poll(&p, 1, 0) == 1) {
      char b;
      (void)r.peer.recv(&b, 1);
      victimDone = true;
    }
    return victimDone;
  };
  hostile(l, stop);
  while (!stop()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  char b = 'E';
  ASSERT_TRUE(r.peer.send(&b, 1));
}
}  // namespace

AttackOutcome runAttack(const std::function<void(const SockAddr&, const VictimInfo&)>& attack, size_t expectComms,
                        const std::function<void(VictimReport&)>& check,
                        std::vector<std::pair<std::string, std::string>> env,
                        std::vector<std::pair<std::string, std::string>> victimOnly) {
  return outcomeOf(testpair::runPair([&](Rank& r) { victimBody(r, expectComms, check); },
                                     [&](Rank& r) { attackerBody(r, attack); }, rankSetups(std::move(env), victimOnly),
                                     std::chrono::seconds(120)));
}

AttackOutcome runConnectAttack(const HostileBody& hostile, Ms limit, const std::function<void(const ConnectReport&)>& check,
                               std::vector<std::pair<std::string, std::string>> env) {
  return outcomeOf(testpair::runPair([&](Rank& r) { connectingVictim(r, limit, check); },
                                     [&](Rank& r) { hostileListenerRank(r, hostile); }, rankSetups(std::move(env), {}),
                                     std::chrono::seconds(120)));
}

}  // namespace icn::adversary
