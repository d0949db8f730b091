// Data-path conformance: byte-exact transfers at every size class, grouped receives with shuffled tags,
// 32 requests in flight with FIFO order, zero-byte messages, receive buffers larger than the message.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <numeric>
#include <random>
#include <vector>

#include "path_log.h"
#include "two_ranks.h"

namespace icn::conformance {
namespace {

using netapi::checkPattern;
using netapi::fillPattern;

void closePair(Rank& r, void* sendComm, void* recvComm) {
  ASSERT_TRUE(r.peer.barrier());  // both sides finished their requests
  if (sendComm) { EXPECT_EQ(r.plugin.net->closeSend(sendComm), ncclSuccess); }
  if (recvComm) { EXPECT_EQ(r.plugin.net->closeRecv(recvComm), ncclSuccess); }
}

void* reg(Rank& r, void* comm, void* buf, size_t len) {
  void* mh = nullptr;
  EXPECT_EQ(r.plugin.net->regMr(comm, buf, len, NCCL_PTR_HOST, &mh), ncclSuccess);
  return mh;
}

const std::vector<size_t> kSizes = {0,         1,          7,           64,          4095,        4096,
                                    65537,     1u << 20,   (4u << 20) + 3, 16u << 20, 64u << 20};

TEST(Transfer, EverySizeByteExact) {
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf((64u << 20) + 4096);
        void* mh = reg(r, rc, buf.data(), buf.size());
        for (size_t i = 0; i < kSizes.size(); i++) {
          std::fill(buf.begin(), buf.end(), 0xEE);
          void* data = buf.data();
          size_t size = buf.size();  // receive buffer larger than the message
          int tag = 7;
          void* req = nullptr;
          ASSERT_EQ(r.plugin.net->irecv(rc, 1, &data, &size, &tag, &mh, nullptr, &req), ncclSuccess);
          ASSERT_NE(req, nullptr);
          int sizes[64] = {};
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, sizes, kWait), ncclSuccess) << "size " << kSizes[i];
          EXPECT_EQ(static_cast<size_t>(sizes[0]), kSizes[i]);
          EXPECT_EQ(checkPattern(buf.data(), kSizes[i], i + 1), SIZE_MAX) << "corrupt data at size " << kSizes[i];
          if (kSizes[i] < buf.size()) { EXPECT_EQ(buf[kSizes[i]], 0xEE) << "bytes written past the message"; }
        }
        EXPECT_EQ(r.plugin.net->deregMr(rc, mh), ncclSuccess);
        closePair(r, nullptr, rc);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf(64u << 20);
        void* mh = reg(r, s, buf.data(), buf.size());
        for (size_t i = 0; i < kSizes.size(); i++) {
          fillPattern(buf.data(), kSizes[i], i + 1);
          void* req = nullptr;
          while (!req) ASSERT_EQ(r.plugin.net->isend(s, buf.data(), kSizes[i], 7, mh, nullptr, &req), ncclSuccess);
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
        }
        EXPECT_EQ(r.plugin.net->deregMr(s, mh), ncclSuccess);
        closePair(r, s, nullptr);
      });
}

TEST(Transfer, GroupedReceivesMatchShuffledTags) {
  constexpr int kN = 8;
  constexpr int kRounds = 20;
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>(70000));
        for (int round = 0; round < kRounds; round++) {
          void* data[kN];
          size_t sizes[kN];
          int tags[kN];
          for (int i = 0; i < kN; i++) {
            data[i] = bufs[i].data();
            sizes[i] = bufs[i].size();
            tags[i] = 100 + i;
          }
          void* req = nullptr;
          ASSERT_EQ(r.plugin.net->irecv(rc, kN, data, sizes, tags, nullptr, nullptr, &req), ncclSuccess);
          int got[64] = {};
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, got, kWait), ncclSuccess);
          for (int i = 0; i < kN; i++) {
            size_t expect = 1000u * (i + 1) + round;
            EXPECT_EQ(static_cast<size_t>(got[i]), expect) << "recv " << i;
            EXPECT_EQ(checkPattern(bufs[i].data(), expect, 1000u * round + i), SIZE_MAX) << "tag " << tags[i];
          }
        }
        closePair(r, nullptr, rc);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::mt19937 rng(42);
        std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>(70000));
        for (int round = 0; round < kRounds; round++) {
          std::vector<int> order(kN);
          std::iota(order.begin(), order.end(), 0);
          std::shuffle(order.begin(), order.end(), rng);
          std::vector<void*> reqs;
          for (int i : order) {
            size_t len = 1000u * (i + 1) + round;
            fillPattern(bufs[i].data(), len, 1000u * round + i);
            void* req = nullptr;
            while (!req) ASSERT_EQ(r.plugin.net->isend(s, bufs[i].data(), len, 100 + i, nullptr, nullptr, &req), ncclSuccess);
            reqs.push_back(req);
          }
          for (void* q : reqs) ASSERT_EQ(netapi::waitRequest(r.plugin, q, nullptr, kWait), ncclSuccess);
        }
        closePair(r, s, nullptr);
      });
}

// 32 receives and 32 sends in flight at once, same tag: completion contents must follow FIFO order.
TEST(Transfer, ThirtyTwoInFlightFifo) {
  constexpr int kDepth = 32;
  constexpr size_t kLen = 256 * 1024;
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<std::vector<uint8_t>> bufs(kDepth, std::vector<uint8_t>(kLen));
        for (int rep = 0; rep < 4; rep++) {
          std::vector<void*> reqs(kDepth);
          for (int i = 0; i < kDepth; i++) {
            void* d = bufs[i].data();
            size_t sz = kLen;
            int tag = 5;
            ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &reqs[i]), ncclSuccess);
            ASSERT_NE(reqs[i], nullptr);
          }
          for (int i = kDepth - 1; i >= 0; i--) {  // test out of order: completion order is the plugin's business
            int got[64] = {};
            ASSERT_EQ(netapi::waitRequest(r.plugin, reqs[i], got, kWait), ncclSuccess);
            EXPECT_EQ(static_cast<size_t>(got[0]), kLen - i);
            EXPECT_EQ(checkPattern(bufs[i].data(), kLen - i, rep * 100 + i), SIZE_MAX) << "message " << i << " out of order";
          }
        }
        closePair(r, nullptr, rc);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<std::vector<uint8_t>> bufs(kDepth, std::vector<uint8_t>(kLen));
        for (int rep = 0; rep < 4; rep++) {
          std::vector<void*> reqs(kDepth);
          for (int i = 0; i < kDepth; i++) {
            fillPattern(bufs[i].data(), kLen - i, rep * 100 + i);
            reqs[i] = nullptr;
            while (!reqs[i])
              ASSERT_EQ(r.plugin.net->isend(s, bufs[i].data(), kLen - i, 5, nullptr, nullptr, &reqs[i]), ncclSuccess);
          }
          for (void* q : reqs) ASSERT_EQ(netapi::waitRequest(r.plugin, q, nullptr, kWait), ncclSuccess);
        }
        closePair(r, s, nullptr);
      });
}

TEST(Transfer, ZeroByteMessagesInterleaved) {
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf(4096);
        for (int i = 0; i < 200; i++) {
          void* d = buf.data();
          size_t sz = buf.size();
          int tag = i % 3;
          void* req = nullptr;
          ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
          int got[64] = {-1};
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, got, kWait), ncclSuccess);
          size_t expect = (i % 2) ? 0 : 100 + i;
          EXPECT_EQ(static_cast<size_t>(got[0]), expect);
          EXPECT_EQ(checkPattern(buf.data(), expect, i), SIZE_MAX);
        }
        closePair(r, nullptr, rc);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf(4096);
        for (int i = 0; i < 200; i++) {
          size_t len = (i % 2) ? 0 : 100 + i;
          fillPattern(buf.data(), len, i);
          void* req = nullptr;
          while (!req) ASSERT_EQ(r.plugin.net->isend(s, len ? buf.data() : nullptr, len, i % 3, nullptr, nullptr, &req), ncclSuccess);
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
        }
        closePair(r, s, nullptr);
      });
}

// More sends than NCCL ever has in flight on one comm (NCCL_NET_MAX_REQUESTS x maxRecvs), none tested: once every
// send request is taken, isend answers success with a NULL request ("try again", as NCCL's proxy reads it), never
// an error, and the send goes through once test() has returned a request. Every message arrives, in order.
TEST(Transfer, SendsPastThePoolAreRetriedNotFailed) {
  static constexpr int kMessages = NCCL_NET_MAX_REQUESTS * 8 + 44;  // past the largest send pool (maxRecvs <= 8)
  static constexpr size_t kLen = 64;
  static constexpr int kTag = 3;
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        ASSERT_TRUE(r.peer.barrier());  // the sender filled its pool before anything is received
        std::vector<std::vector<uint8_t>> bufs(NCCL_NET_MAX_REQUESTS, std::vector<uint8_t>(kLen));
        for (int first = 0; first < kMessages; first += NCCL_NET_MAX_REQUESTS) {
          const int n = std::min(NCCL_NET_MAX_REQUESTS, kMessages - first);
          std::vector<void*> reqs(n);
          for (int i = 0; i < n; i++) {
            void* d = bufs[i].data();
            size_t sz = kLen;
            int tag = kTag;
            ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &reqs[i]), ncclSuccess);
            ASSERT_NE(reqs[i], nullptr);
          }
          for (int i = 0; i < n; i++) {
            int got[64] = {};
            ASSERT_EQ(netapi::waitRequest(r.plugin, reqs[i], got, kWait), ncclSuccess);
            EXPECT_EQ(static_cast<size_t>(got[0]), kLen);
            EXPECT_EQ(checkPattern(bufs[i].data(), kLen, first + i), SIZE_MAX) << "message " << first + i;
          }
        }
        closePair(r, nullptr, rc);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<std::vector<uint8_t>> bufs(kMessages, std::vector<uint8_t>(kLen));
        for (int i = 0; i < kMessages; i++) fillPattern(bufs[i].data(), kLen, i);
        std::deque<void*> inflight;
        int next = 0;
        for (; next < kMessages; next++) {  // post without testing until the plugin pushes back
          void* req = nullptr;
          ASSERT_EQ(r.plugin.net->isend(s, bufs[next].data(), kLen, kTag, nullptr, nullptr, &req), ncclSuccess)
              << "send " << next << " with " << inflight.size() << " in flight";
          if (!req) break;
          inflight.push_back(req);
        }
        ASSERT_LT(next, kMessages) << "isend never answered NULL: the test did not reach the plugin's limit";
        ASSERT_TRUE(r.peer.barrier());
        const auto deadline = netapi::Clock::now() + kWait;
        while (next < kMessages || !inflight.empty()) {  // NCCL's proxy: retry the send, test the oldest
          ASSERT_LT(netapi::Clock::now(), deadline) << next << " of " << kMessages << " sent";
          if (next < kMessages) {
            void* req = nullptr;
            ASSERT_EQ(r.plugin.net->isend(s, bufs[next].data(), kLen, kTag, nullptr, nullptr, &req), ncclSuccess);
            if (req) {
              inflight.push_back(req);
              next++;
              continue;
            }
          }
          int done = 0;
          ASSERT_EQ(r.plugin.net->test(inflight.front(), &done, nullptr), ncclSuccess);
          if (done) inflight.pop_front();
        }
        closePair(r, s, nullptr);
      });
}

// Sends posted before their receives (NCCL's sender runs ahead of the receiver's proxy), then a larger message
// with another tag whose receive the receiver posts first: every message lands in its own receive, same-tag
// ones in FIFO order, and the larger one is not held up behind the earlier ones. ICN's TCP transport sends the
// same-tag ones early, spread over its early lanes: its log must show them all early, on every lane allowed.
TEST(Transfer, SendsAheadOfTheirReceivesArriveInOrder) {
  static constexpr int kAhead = 8;
  static constexpr size_t kLen = 256 * 1024;  // above the TCP transport's lane-0 limit, below its early limit
  static constexpr size_t kBig = 4u << 20;
  RunOptions opts;
  opts.env.emplace_back("NCCL_DEBUG", "INFO");  // the sender's path line is INFO
  opts.env.emplace_back("ICN_TCP_LANE_EAGER_BYTES", "1048576");  // sending ahead on helper lanes is off by default
  auto out = runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<std::vector<uint8_t>> bufs(kAhead + 1, std::vector<uint8_t>(kLen));
        std::vector<uint8_t> big(kBig);
        auto post = [&](void* d, size_t sz, int tag) {
          void* req = nullptr;
          EXPECT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
          EXPECT_NE(req, nullptr);
          return req;
        };
        int got[64] = {};
        ASSERT_EQ(netapi::waitRequest(r.plugin, post(bufs[0].data(), kLen, 7), got, kWait), ncclSuccess);
        EXPECT_EQ(checkPattern(bufs[0].data(), kLen, 0), SIZE_MAX);
        ASSERT_TRUE(r.peer.barrier());  // the sender posted every send
        void* bigReq = post(big.data(), kBig, 9);
        ASSERT_EQ(netapi::waitRequest(r.plugin, bigReq, got, kWait), ncclSuccess);
        EXPECT_EQ(static_cast<size_t>(got[0]), kBig);
        EXPECT_EQ(checkPattern(big.data(), kBig, 99), SIZE_MAX) << "the larger message";
        std::vector<void*> reqs;
        for (int i = 1; i <= kAhead; i++) reqs.push_back(post(bufs[i].data(), kLen, 7));
        for (int i = 1; i <= kAhead; i++) {
          ASSERT_EQ(netapi::waitRequest(r.plugin, reqs[i - 1], got, kWait), ncclSuccess);
          EXPECT_EQ(static_cast<size_t>(got[0]), kLen - i);
          EXPECT_EQ(checkPattern(bufs[i].data(), kLen - i, i), SIZE_MAX) << "message " << i << " out of order";
        }
        closePair(r, nullptr, rc);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<std::vector<uint8_t>> bufs(kAhead + 1, std::vector<uint8_t>(kLen));
        std::vector<uint8_t> big(kBig);
        fillPattern(big.data(), kBig, 99);
        auto send = [&](const void* d, size_t sz, int tag) {
          void* req = nullptr;
          while (!req) EXPECT_EQ(r.plugin.net->isend(s, const_cast<void*>(d), sz, tag, nullptr, nullptr, &req), ncclSuccess);
          return req;
        };
        fillPattern(bufs[0].data(), kLen, 0);
        ASSERT_EQ(netapi::waitRequest(r.plugin, send(bufs[0].data(), kLen, 7), nullptr, kWait), ncclSuccess);
        std::vector<void*> reqs;
        for (int i = 1; i <= kAhead; i++) {
          fillPattern(bufs[i].data(), kLen - i, i);
          reqs.push_back(send(bufs[i].data(), kLen - i, 7));
        }
        reqs.push_back(send(big.data(), kBig, 9));
        ASSERT_TRUE(r.peer.barrier());
        for (void* q : reqs) ASSERT_EQ(netapi::waitRequest(r.plugin, q, nullptr, kWait), ncclSuccess);
        closePair(r, s, nullptr);
      },
      opts);
  testpair::SendPaths p = testpair::sendPaths(out[1].log);
  printf("SENDS-AHEAD: %s\n", testpair::describe(p).c_str());
  if (p.transport == "tcp") {
    EXPECT_EQ(p.early, static_cast<uint64_t>(kAhead)) << "the sends ahead of their receives did not all go early";
    EXPECT_GT(p.earlyLanesAllowed, 0);
    EXPECT_EQ(p.earlyLanesUsed, p.earlyLanesAllowed) << "early messages did not spread over the lanes allowed";
  }
}

// Both directions at once over two comms (what every NCCL ring step does).
TEST(Transfer, BidirectionalConcurrent) {
  constexpr int kIters = 50;
  constexpr size_t kLen = 1 << 20;
  auto body = [](Rank& r) {
    // Each rank listens and connects: rank 0's handle first, then rank 1's.
    char mine[NCCL_NET_HANDLE_MAXSIZE] = {}, theirs[NCCL_NET_HANDLE_MAXSIZE];
    void* l = nullptr;
    ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, mine, &l), ncclSuccess);
    ASSERT_TRUE(r.peer.send(mine, sizeof mine));
    ASSERT_TRUE(r.peer.recv(theirs, sizeof theirs));
    void *s = nullptr, *rc = nullptr;
    ncclNetDeviceHandle_v11_t* dh = nullptr;
    auto deadline = netapi::Clock::now() + kWait;
    while (!s || !rc) {  // interleave like NCCL's proxy: neither side may block the other
      if (!s) { ASSERT_EQ(r.plugin.net->connect(r.plugin.ctx, 0, theirs, &s, &dh), ncclSuccess); }
      if (!rc) { ASSERT_EQ(r.plugin.net->accept(l, &rc, &dh), ncclSuccess); }
      ASSERT_LT(netapi::Clock::now(), deadline);
    }
    std::vector<uint8_t> out(kLen), in(kLen);
    for (int i = 0; i < kIters; i++) {
      fillPattern(out.data(), kLen, r.rank * 1000 + i);
      void *sr = nullptr, *rr = nullptr;
      void* d = in.data();
      size_t sz = kLen;
      int tag = 1;
      ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &rr), ncclSuccess);
      while (!sr) ASSERT_EQ(r.plugin.net->isend(s, out.data(), kLen, 1, nullptr, nullptr, &sr), ncclSuccess);
      int doneS = 0, doneR = 0;
      auto dl = netapi::Clock::now() + kWait;
      while (!doneS || !doneR) {
        if (!doneS) { ASSERT_EQ(r.plugin.net->test(sr, &doneS, nullptr), ncclSuccess); }
        if (!doneR) { ASSERT_EQ(r.plugin.net->test(rr, &doneR, nullptr), ncclSuccess); }
        ASSERT_LT(netapi::Clock::now(), dl);
      }
      ASSERT_EQ(checkPattern(in.data(), kLen, (1 - r.rank) * 1000 + i), SIZE_MAX);
    }
    ASSERT_TRUE(r.peer.barrier());
    EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
    EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
    EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
  };
  runTwoRanks(body, body);
}

}  // namespace
}  // namespace icn::conformance
