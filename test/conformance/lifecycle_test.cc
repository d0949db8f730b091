// Comm lifecycle: many comms from one listen comm, close in every order, repeated connect/close
// without leaking file descriptors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "two_ranks.h"

namespace icn::conformance {
namespace {

using testpair::openFds;

void sendOne(Rank& r, void* s, uint32_t value) {
  void* req = nullptr;
  while (!req) ASSERT_EQ(r.plugin.net->isend(s, &value, sizeof value, 0, nullptr, nullptr, &req), ncclSuccess);
  ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
}

uint32_t recvOne(Rank& r, void* rc) {
  uint32_t v = 0xFFFFFFFF;
  void* d = &v;
  size_t sz = sizeof v;
  int tag = 0;
  void* req = nullptr;
  EXPECT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
  EXPECT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
  return v;
}

TEST(Lifecycle, ManyCommsFromOneListenComm) {
  constexpr int kComms = 24;
  runTwoRanks(
      [](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
        ASSERT_TRUE(r.peer.send(handle, sizeof handle));
        std::vector<void*> rcs(kComms);
        for (auto& rc : rcs) ASSERT_EQ(netapi::acceptBlocking(r.plugin, l, &rc, kWait), ncclSuccess);
        std::vector<bool> seen(kComms, false);
        for (auto* rc : rcs) {  // accept order need not match connect order: the payload says which
          uint32_t id = recvOne(r, rc);
          ASSERT_LT(id, static_cast<uint32_t>(kComms));
          EXPECT_FALSE(seen[id]) << "two comms delivered id " << id;
          seen[id] = true;
        }
        ASSERT_TRUE(r.peer.barrier());
        for (auto* rc : rcs) EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
        EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
      },
      [](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
        std::vector<void*> ss(kComms);
        for (int i = 0; i < kComms; i++) {
          char copy[NCCL_NET_HANDLE_MAXSIZE];  // NCCL gives each connection its own copy of the handle
          memcpy(copy, handle, sizeof copy);
          ASSERT_EQ(netapi::connectBlocking(r.plugin, 0, copy, &ss[i], kWait), ncclSuccess);
        }
        for (int i = 0; i < kComms; i++) sendOne(r, ss[i], static_cast<uint32_t>(i));
        ASSERT_TRUE(r.peer.barrier());
        for (auto* s : ss) EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      });
}

// Connections made concurrently from copies of one handle while the listener accepts (NCCL connects its channels'
// connections without waiting for each other): every one is set up. Over ICN's TCP transport each is a control
// socket and 1 + ICN_TCP_STREAMS lanes, all in set-up at once at the listener.
constexpr int kConcurrentComms = 16;

TEST(Lifecycle, ConcurrentConnectsFromOneListenComm) {
  runTwoRanks(
      [](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
        ASSERT_TRUE(r.peer.send(handle, sizeof handle));
        std::vector<void*> rcs(kConcurrentComms);
        for (auto& rc : rcs) ASSERT_EQ(netapi::acceptBlocking(r.plugin, l, &rc, kWait), ncclSuccess);
        // Every receive is posted before any is waited for: accept order need not match connect order.
        std::vector<uint32_t> ids(kConcurrentComms, 0xFFFFFFFF);
        std::vector<void*> reqs(kConcurrentComms, nullptr);
        for (int i = 0; i < kConcurrentComms; i++) {
          void* d = &ids[i];
          size_t sz = sizeof ids[i];
          int tag = 0;
          ASSERT_EQ(r.plugin.net->irecv(rcs[i], 1, &d, &sz, &tag, nullptr, nullptr, &reqs[i]), ncclSuccess);
          ASSERT_NE(reqs[i], nullptr);
        }
        std::vector<bool> seen(kConcurrentComms, false);
        for (int i = 0; i < kConcurrentComms; i++) {
          ASSERT_EQ(netapi::waitRequest(r.plugin, reqs[i], nullptr, kWait), ncclSuccess);
          ASSERT_LT(ids[i], static_cast<uint32_t>(kConcurrentComms));
          EXPECT_FALSE(seen[ids[i]]) << "two comms delivered id " << ids[i];
          seen[ids[i]] = true;
        }
        ASSERT_TRUE(r.peer.barrier());
        for (auto* rc : rcs) EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
        EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
      },
      [](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
        std::vector<std::vector<char>> copies(kConcurrentComms, std::vector<char>(handle, handle + sizeof handle));
        std::vector<void*> ss(kConcurrentComms, nullptr);
        ncclNetDeviceHandle_v11_t* devHandle = nullptr;
        const auto deadline = netapi::Clock::now() + kWait;
        for (int connected = 0; connected < kConcurrentComms;) {  // one connect() call per pending connection, round robin
          for (int i = 0; i < kConcurrentComms; i++) {
            if (ss[i]) continue;
            ASSERT_EQ(r.plugin.net->connect(r.plugin.ctx, 0, copies[i].data(), &ss[i], &devHandle), ncclSuccess)
                << "connection " << i << " of " << kConcurrentComms << " (" << connected << " connected)";
            connected += ss[i] != nullptr;
          }
          ASSERT_LT(netapi::Clock::now(), deadline) << connected << " of " << kConcurrentComms << " connected";
        }
        std::vector<uint32_t> ids(kConcurrentComms);
        std::vector<void*> reqs(kConcurrentComms, nullptr);
        for (int i = 0; i < kConcurrentComms; i++) {
          ids[i] = static_cast<uint32_t>(i);
          while (!reqs[i])
            ASSERT_EQ(r.plugin.net->isend(ss[i], &ids[i], sizeof ids[i], 0, nullptr, nullptr, &reqs[i]), ncclSuccess);
        }
        for (auto* req : reqs) ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        for (auto* s : ss) EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      });
}

// Closing returns within testpair::closeBound() (50 ms) whatever the peer does (idle, closing too, or gone).
template <typename Fn>
void expectQuickClose(const char* what, Fn&& close) {
  auto t0 = netapi::Clock::now();
  EXPECT_EQ(close(), ncclSuccess) << what;
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(netapi::Clock::now() - t0);
  EXPECT_LT(took, testpair::closeBound()) << what << " took " << took.count() << " us";
}

// order: 0 = sender closes first, 1 = receiver first, 2 = listen comm closed before the accepted comm,
// 3 = both close without a barrier (racing).
class CloseOrder : public ::testing::TestWithParam<int> {};

TEST_P(CloseOrder, ClosesCleanly) {
  const int order = GetParam();
  runTwoRanks(
      [order](Rank& r) {
        void *s = nullptr, *rc = nullptr, *l = nullptr;
        r.connectPair(&s, &rc, &l);
        EXPECT_EQ(recvOne(r, rc), 42u);
        if (order == 2) { expectQuickClose("closeListen", [&] { return r.plugin.net->closeListen(l); }); }
        if (order == 0) { ASSERT_TRUE(r.peer.barrier()); }  // wait until the sender closed
        // With order 1 the sender is idle (waiting on the barrier) while this close runs.
        expectQuickClose("closeRecv", [&] { return r.plugin.net->closeRecv(rc); });
        if (order == 1) { ASSERT_TRUE(r.peer.barrier()); }
        if (order != 2) { expectQuickClose("closeListen", [&] { return r.plugin.net->closeListen(l); }); }
      },
      [order](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        sendOne(r, s, 42);
        if (order == 1) { ASSERT_TRUE(r.peer.barrier()); }  // wait until the receiver closed
        // With order 0 the receiver is idle (waiting on the barrier) while this close runs.
        expectQuickClose("closeSend", [&] { return r.plugin.net->closeSend(s); });
        if (order == 0) { ASSERT_TRUE(r.peer.barrier()); }
      });
}
INSTANTIATE_TEST_SUITE_P(Orders, CloseOrder, ::testing::Values(0, 1, 2, 3));

// ICN_CONF_LIFECYCLE_CYCLES (default 150, at least 20) shortens the run where each connection set-up is slow:
// UCX over rc_verbs on Soft-RoCE under full emulation takes ~2 s per cycle (four UCP workers with their IB
// interfaces), so the VM suite runs 40 (still 29 cycles after the file descriptor baseline).
int lifecycleCycles() {
  const char* v = getenv("ICN_CONF_LIFECYCLE_CYCLES");
  int n = v && *v ? atoi(v) : 150;
  return n < 20 ? 20 : n;
}

TEST(Lifecycle, RepeatedConnectCloseDoesNotLeak) {
  const int kCycles = lifecycleCycles();
  auto cycleBody = [kCycles](Rank& r) {
    int baseline = -1;
    for (int c = 0; c < kCycles; c++) {
      void *s = nullptr, *rc = nullptr;
      r.connectPair(&s, &rc);
      if (r.rank == 1) sendOne(r, s, static_cast<uint32_t>(c));
      else { EXPECT_EQ(recvOne(r, rc), static_cast<uint32_t>(c)); }
      ASSERT_TRUE(r.peer.barrier());
      if (s) { ASSERT_EQ(r.plugin.net->closeSend(s), ncclSuccess); }
      if (rc) { ASSERT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess); }
      if (c == 10) baseline = openFds();  // after UCX's lazily-created resources exist
    }
    // Closes return at once and finish (flush, release) on later calls into the plugin or at finalize, as
    // NCCL's communicator destroy ends with it.
    ASSERT_EQ(r.plugin.net->finalize(r.plugin.ctx), ncclSuccess);
    r.plugin.ctx = nullptr;
    int end = openFds();
    for (auto until = netapi::Clock::now() + std::chrono::seconds(3); end > baseline + 2 && netapi::Clock::now() < until;
         end = openFds())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_LE(end, baseline + 2) << "file descriptors grew from " << baseline << " to " << end << " over "
                                 << kCycles - 11 << " connect/close cycles";
  };
  runTwoRanks(cycleBody, cycleBody, RunOptions{std::chrono::seconds(300)});
}

}  // namespace
}  // namespace icn::conformance
