// Verbs failover between the links of a fused device, in the Soft-RoCE VM. One guest (test/vm/failover-tests.sh):
// two veth pairs, rxe0 <-> rxe1 (link 0) and rxe2 <-> rxe3 (link 1); rank 0 fuses rxe0+rxe2, rank 1 rxe1+rxe3
// (makeVDevice, as NCCL does for a dual-port NIC), the out-of-band socket on lo. Two guests
// (test/vm/cross-host-failover-tests.sh, ICN_PAIR_RANK across hosts): each fuses its rxe0 (eth0, link 0, which
// also carries the out-of-band socket) and rxe1 (eth1, link 1). Rank 1 streams messages of mixed sizes to rank 0
// (one chunk per link for the large ones, a single chunk for the small), every byte checked. The guest script
// passes the faults as commands rank 0 runs: ICN_REL_FAILOVER_DOWN takes link ICN_REL_FAILOVER_LINK (default 0)
// down, ICN_REL_FAILOVER_UP brings it back, ICN_REL_FAILOVER_DOWN2 takes link ICN_REL_FAILOVER_LINK2 (default 1)
// down; ICN_REL_FAILOVER_RESTORE, when set, brings the links back once the stream ended and before the receiver
// closes; ICN_REL_FAILOVER_HCA0 / _HCA1 choose each rank's devices.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "ranks.h"

namespace icn::rel {
namespace {

constexpr size_t kBuf = 1 << 20;
constexpr int kInFlight = 8;
constexpr int kBeforeFault = 24;
constexpr int kTotal = 200;
constexpr auto kDetectLimit = std::chrono::seconds(30);
// A stream gives up after this long (the two-guest emulation moves about 30 messages a second, slower when the
// host is busy); the harness's own deadline is above it.
constexpr double kStreamLimitS = 300;
constexpr auto kPairLimit = std::chrono::seconds(400);

size_t sizeOf(uint64_t i) {  // two chunks (one per link), one chunk, an odd size split in two
  static const size_t sizes[] = {kBuf, 4096, 300001};
  return sizes[i % 3];
}

int sh(const std::string& cmd) {
  int rc = system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

double secondsSince(netapi::Clock::time_point t) {
  return std::chrono::duration<double>(netapi::Clock::now() - t).count();
}

const char* env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : nullptr;
}

// Both devices of the rank fused into one, as NCCL's makeVDevice call does.
int fusedDevice(Rank& r) {
  int n = 0;
  EXPECT_EQ(r.plugin.net->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 2) << "each rank must see two rxe devices (ICN_IB_HCA)";
  ncclNetVDeviceProps_v11_t two{};
  two.ndevs = 2;
  two.devs[0] = 0;
  two.devs[1] = 1;
  int vd = -1;
  EXPECT_EQ(r.plugin.net->makeVDevice(&vd, &two), ncclSuccess);
  return vd;
}

void connectFused(Rank& r, void** sendComm, void** recvComm) {
  const int vd = fusedDevice(r);
  ASSERT_GE(vd, 0);
  if (r.rank == 0) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* l = nullptr;
    ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, vd, handle, &l), ncclSuccess);
    ASSERT_TRUE(r.peer.send(handle, sizeof handle));
    ASSERT_EQ(netapi::acceptBlocking(r.plugin, l, recvComm, testpair::kWait), ncclSuccess);
    ASSERT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
  } else {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
    ASSERT_EQ(netapi::connectBlocking(r.plugin, vd, handle, sendComm, testpair::kWait), ncclSuccess);
  }
}

// A command the receiver runs once it has `afterMessages` messages and `afterSeconds` passed since the last one.
struct Fault {
  int afterMessages;
  double afterSeconds;
  std::string cmd;
};

struct StreamResult {
  ncclResult_t res = ncclSuccess;
  uint64_t done = 0;          // messages completed (intact, for the receiver)
  double maxGapAfterFault = 0;  // longest wait between two completions once the first fault was injected
  double maxGapAt = 0;          // when that wait ended, in seconds after the last fault before it
  size_t maxGapFault = 0;       // how many faults had been injected by then
  std::optional<netapi::Clock::time_point> lastFault;
};

// The receiver: posts kInFlight receives (at most one per paceMs), checks every message, runs the faults in turn
// (and tells the sender through the harness pipe).
StreamResult receive(Rank& r, void* rc, const std::vector<Fault>& faults, uint64_t total = kTotal, int paceMs = 0) {
  std::vector<std::vector<uint8_t>> bufs(kInFlight, std::vector<uint8_t>(kBuf));
  std::vector<void*> reqs(kInFlight, nullptr);
  StreamResult out;
  uint64_t posted = 0;
  size_t nextFault = 0;
  auto start = netapi::Clock::now(), last = start, lastPost = start, lastFault = start;
  while (out.res == ncclSuccess && out.done < total && secondsSince(start) < kStreamLimitS) {
    while (out.res == ncclSuccess && posted < total && posted - out.done < kInFlight &&
           secondsSince(lastPost) * 1000 >= paceMs) {
      lastPost = netapi::Clock::now();
      void* d = bufs[posted % kInFlight].data();
      size_t sz = kBuf;
      int tag = 1;
      out.res = r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &reqs[posted % kInFlight]);
      if (out.res == ncclSuccess) posted++;
    }
    if (out.res != ncclSuccess) break;
    if (posted == out.done) continue;  // paced: the next receive is not posted yet
    int done = 0, size = 0;
    out.res = r.plugin.net->test(reqs[out.done % kInFlight], &done, &size);
    if (out.res != ncclSuccess || !done) continue;
    EXPECT_EQ(size_t(size), sizeOf(out.done)) << "message " << out.done;
    EXPECT_EQ(netapi::checkPattern(bufs[out.done % kInFlight].data(), sizeOf(out.done), out.done), SIZE_MAX)
        << "message " << out.done << " corrupt";
    if (out.lastFault && secondsSince(last) > out.maxGapAfterFault) {
      out.maxGapAfterFault = secondsSince(last);
      out.maxGapAt = secondsSince(*out.lastFault);
      out.maxGapFault = nextFault;
    }
    last = netapi::Clock::now();
    ++out.done;
    if (nextFault < faults.size() && out.done >= uint64_t(faults[nextFault].afterMessages) &&
        secondsSince(lastFault) >= faults[nextFault].afterSeconds) {
      EXPECT_EQ(sh(faults[nextFault].cmd), 0) << faults[nextFault].cmd;
      out.lastFault = last = lastFault = netapi::Clock::now();
      char c = 'f';
      EXPECT_TRUE(r.peer.send(&c, 1));
      ++nextFault;
    }
  }
  EXPECT_EQ(nextFault, faults.size()) << "the stream ended before every fault was injected";
  return out;
}

// The receiver's links back up before its QPs are destroyed. A downed virtio NIC keeps the packets it had not sent
// in its ring; Soft-RoCE on some kernels (6.1) frees a QP's socket while such a packet still names it, and the
// NIC coming back up later reclaims the packet through freed memory (a guest kernel oops). Bringing the link up
// while every QP is alive (the comm keeps failed links' QPs until it closes) reclaims them safely.
void restoreLinks() {
  if (const char* cmd = env("ICN_REL_FAILOVER_RESTORE")) EXPECT_EQ(sh(cmd), 0) << cmd;
}

// The sender: keeps kInFlight sends of the pattern in flight until `total` completed or an error.
StreamResult send(Rank& r, void* s, uint64_t total = kTotal) {
  std::vector<std::vector<uint8_t>> bufs(kInFlight, std::vector<uint8_t>(kBuf));
  std::vector<void*> reqs(kInFlight, nullptr);
  StreamResult out;
  uint64_t posted = 0;
  auto start = netapi::Clock::now();
  while (out.res == ncclSuccess && out.done < total && secondsSince(start) < kStreamLimitS) {
    pollfd p{r.peer.fd(), POLLIN, 0};
    if (poll(&p, 1, 0) == 1) {
      char c;
      if (r.peer.recv(&c, 1)) out.lastFault = netapi::Clock::now();
    }
    while (out.res == ncclSuccess && posted < total && posted - out.done < kInFlight) {
      auto& b = bufs[posted % kInFlight];
      netapi::fillPattern(b.data(), sizeOf(posted), posted);
      void* req = nullptr;
      out.res = r.plugin.net->isend(s, b.data(), sizeOf(posted), 1, nullptr, nullptr, &req);
      if (out.res != ncclSuccess || !req) break;
      reqs[posted++ % kInFlight] = req;
    }
    if (out.res != ncclSuccess || posted == out.done) continue;
    int done = 0;
    out.res = r.plugin.net->test(reqs[out.done % kInFlight], &done, nullptr);
    if (out.res == ncclSuccess && done) out.done++;
  }
  return out;
}

std::string hcaList(int rank) {
  const char* v = env(rank == 0 ? "ICN_REL_FAILOVER_HCA0" : "ICN_REL_FAILOVER_HCA1");
  return v ? v : rank == 0 ? "=rxe0,rxe2" : "=rxe1,rxe3";
}

// The device of `rank` that forms `link` (member `link` of its fused device).
std::string linkDevice(int rank, int link) {
  std::string list = hcaList(rank);
  if (!list.empty() && list[0] == '=') list.erase(0, 1);
  for (int i = 0; i < link && list.find(',') != std::string::npos; ++i) list.erase(0, list.find(',') + 1);
  return list.substr(0, list.find(','));
}

int envLink(const char* name, int dflt) {
  const char* v = env(name);
  return v ? atoi(v) : dflt;
}

std::array<RankSetup, 2> fusedSetup() {
  std::array<RankSetup, 2> setup;
  const char* ifname = env("ICN_SOCKET_IFNAME");
  for (int i = 0; i < 2; i++)
    setup[i].env = {{"ICN_TRANSPORT", "ib"}, {"ICN_IB_HCA", hcaList(i)}, {"ICN_SOCKET_IFNAME", ifname ? ifname : "lo"},
                    {"ICN_LOG_DETAIL", "1"}, {"NCCL_DEBUG", "INFO"}};
  return setup;
}

int countWarns(const RankOutcome& o, std::initializer_list<std::string> needles) {
  std::istringstream in(o.log);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    bool all = line.find("WARN") != std::string::npos;
    for (const auto& x : needles) all = all && line.find(x) != std::string::npos;
    n += all;
  }
  return n;
}

// The sending rank of every test: streams `total` messages; `survives`: a link is left, so it must end without an
// error (else it must fail, after the first fault was bridged).
testpair::Body sender(bool survives, uint64_t total = kTotal) {
  return [=](Rank& r) {
    void *s = nullptr, *rc = nullptr;
    connectFused(r, &s, &rc);
    ASSERT_NE(s, nullptr);
    StreamResult res = send(r, s, total);
    if (survives) {
      EXPECT_EQ(res.res, ncclSuccess) << "the send side failed although a link was left";
      EXPECT_EQ(res.done, total);
    } else {
      EXPECT_NE(res.res, ncclSuccess) << "sending with every link down never failed";
      EXPECT_GE(res.done, uint64_t(2 * kBeforeFault) - kInFlight) << "the first fault was not bridged";
    }
    printf("FAILOVER sender: %llu of %llu sends completed%s\n", (unsigned long long)res.done,
           (unsigned long long)total, survives ? "" : " before the error");
    EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
  };
}

// One link down mid-stream: every message arrives intact, in order, neither side sees an error, and both name the
// dead link in a WARN; the sender resends what the receiver reported missing.
TEST(VerbsFailover, OneLinkDownMidStreamLosesNothing) {
  const char* down = env("ICN_REL_FAILOVER_DOWN");
  if (!down) GTEST_SKIP() << "runs inside the Soft-RoCE VM (test/vm/failover-tests.sh sets ICN_REL_FAILOVER_DOWN)";
  auto out = runPair(
      [down](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        connectFused(r, &s, &rc);
        ASSERT_NE(rc, nullptr);
        StreamResult res = receive(r, rc, {{kBeforeFault, 0, down}});
        EXPECT_EQ(res.res, ncclSuccess) << "the receive side failed although one link was left";
        EXPECT_EQ(res.done, uint64_t(kTotal));
        printf("FAILOVER receiver: %llu of %d messages intact, longest stall after the fault %.2f s\n",
               (unsigned long long)res.done, kTotal, res.maxGapAfterFault);
        EXPECT_LT(res.maxGapAfterFault, double(kDetectLimit.count()));
        restoreLinks();
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
      },
      sender(true),
      fusedSetup(), kPairLimit);
  EXPECT_TRUE(out[0].cleanExit()) << "receiver";
  EXPECT_TRUE(out[1].cleanExit()) << "sender";
  const std::string link = "link " + std::to_string(envLink("ICN_REL_FAILOVER_LINK", 0));
  for (int i = 0; i < 2; i++)
    EXPECT_TRUE(out[i].warnHas({link, "failed", "going on over 1 of 2 links", ":" + std::to_string(out[1 - i].pid)}))
        << "rank " << i << " has no WARN naming the dead link and the peer";
  EXPECT_TRUE(out[0].logHas(link + " report sent")) << "the receiver never reported what it holds";
  if (link == "link 0")
    EXPECT_TRUE(out[0].logHas("clear-to-send moved to QP 1")) << "the CTS did not leave the dead link";
  EXPECT_TRUE(out[1].logHas(link + " report")) << "the sender never read the receiver's report";
}

// Both links down, one after the other: the first is bridged, the second fails both sides with an error (never a
// hang) within 30 s, and both close cleanly.
TEST(VerbsFailover, LastLinkDownFailsBothSides) {
  const char* down = env("ICN_REL_FAILOVER_DOWN");
  const char* down2 = env("ICN_REL_FAILOVER_DOWN2");
  if (!down || !down2) GTEST_SKIP() << "runs inside the Soft-RoCE VM (test/vm/failover-tests.sh)";
  auto out = runPair(
      [down, down2](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        connectFused(r, &s, &rc);
        ASSERT_NE(rc, nullptr);
        StreamResult res = receive(r, rc, {{kBeforeFault, 0, down}, {2 * kBeforeFault, 0, down2}});
        ASSERT_TRUE(res.lastFault.has_value()) << "failed before the faults (" << res.done << " messages)";
        EXPECT_NE(res.res, ncclSuccess) << "no error with both links down";
        EXPECT_GE(res.done, uint64_t(2 * kBeforeFault)) << "the first fault was not bridged";
        const double t = secondsSince(*res.lastFault);
        printf("FAILOVER receiver: %llu messages intact, error %.1f s after the last link went down\n",
               (unsigned long long)res.done, t);
        EXPECT_LT(t, double(kDetectLimit.count()));
        restoreLinks();
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
      },
      sender(false),
      fusedSetup(), kPairLimit);
  EXPECT_TRUE(out[0].cleanExit()) << "receiver";
  EXPECT_TRUE(out[1].cleanExit()) << "sender";
  for (int i = 0; i < 2; i++)
    EXPECT_TRUE(out[i].warnHas({"connection with", "failed", ":" + std::to_string(out[1 - i].pid)}))
        << "rank " << i << " has no WARN naming the peer";
}

// A link that comes back is re-admitted and carries the stream again: link 0 down, back 2 s later, then link 1
// down 4 s after that. The stream (paced to 10 ms a message, at least 15 s) survives only if link 0 was re-admitted.
// Across two guests the same link goes down the second time (link 0 carries the out-of-band socket there).
TEST(VerbsFailover, LinkBackIsReadmittedAndCarriesTheStream) {
  const char* down = env("ICN_REL_FAILOVER_DOWN");
  const char* up = env("ICN_REL_FAILOVER_UP");
  const char* down2 = env("ICN_REL_FAILOVER_DOWN2");
  if (!down || !up || !down2) GTEST_SKIP() << "runs inside the Soft-RoCE VM (test/vm/failover-tests.sh)";
  constexpr uint64_t kPaced = 1500;
  auto out = runPair(
      [&](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        connectFused(r, &s, &rc);
        ASSERT_NE(rc, nullptr);
        StreamResult res = receive(r, rc, {{kBeforeFault, 0, down}, {0, 2, up}, {0, 4, down2}}, kPaced, 10);
        EXPECT_EQ(res.res, ncclSuccess) << "the receive side failed: link 0 was not re-admitted?";
        EXPECT_EQ(res.done, kPaced);
        printf("FAILOVER receiver: %llu of %llu messages intact, longest stall after the first fault %.2f s "
               "(ended %.2f s after fault %zu)\n",
               (unsigned long long)res.done, (unsigned long long)kPaced, res.maxGapAfterFault, res.maxGapAt,
               res.maxGapFault);
        restoreLinks();
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
      },
      sender(true, kPaced),
      fusedSetup(), kPairLimit);
  EXPECT_TRUE(out[0].cleanExit()) << "receiver";
  EXPECT_TRUE(out[1].cleanExit()) << "sender";
  const int l1 = envLink("ICN_REL_FAILOVER_LINK", 0), l2 = envLink("ICN_REL_FAILOVER_LINK2", 1);
  const std::string link = "link " + std::to_string(l1), link2 = "link " + std::to_string(l2);
  for (int i = 0; i < 2; i++) {
    EXPECT_TRUE(out[i].logHas(link + " (" + linkDevice(i, l1) + " port 1) re-admitted"))
        << "rank " << i << " never re-admitted " << link;
    // The second fault on the same link is seen only if the link was back in use; on the other link it is
    // bridged only if the returned one carries the stream.
    EXPECT_GE(countWarns(out[i], {link2 + " (", "failed", "going on over 1 of 2 links"}), l1 == l2 ? 2 : 1)
        << "rank " << i << ": " << link2 << " failing after the return was not bridged";
  }
}

}  // namespace
}  // namespace icn::rel
