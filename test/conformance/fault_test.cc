// Faults: a peer killed mid-transfer turns into an error on the survivor (never a hang), and the
// survivor can still close its comms.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <vector>

#include "two_ranks.h"

namespace icn::conformance {
namespace {

constexpr auto kDetectLimit = std::chrono::seconds(30);  // the promise made to users

// Waits on a request that can never complete because the peer died; expects an error, not done.
void expectFailureWithin(Rank& r, void* req) {
  auto start = netapi::Clock::now();
  int done = 0;
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && !done && netapi::Clock::now() - start < kDetectLimit)
    res = r.plugin.net->test(req, &done, nullptr);
  EXPECT_NE(res, ncclSuccess) << "a dead peer was not reported within " << kDetectLimit.count() << " s";
  EXPECT_FALSE(done && res == ncclSuccess) << "request completed although the peer died before sending it";
}

TEST(Fault, SenderKilledMidTransferFailsReceiver) {
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf(64u << 20);
        void* d = buf.data();
        size_t sz = buf.size();
        int tag = 1;
        void* req = nullptr;
        ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());  // the sender starts and gets killed
        expectFailureWithin(r, req);
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        ASSERT_TRUE(r.peer.barrier());
        std::vector<uint8_t> buf(32u << 20, 1);  // smaller than posted: the receive is still incomplete
        void* req = nullptr;
        int tag = 2;  // a tag the receiver never posted: nothing can complete its receive
        while (!req) ASSERT_EQ(r.plugin.net->isend(s, buf.data(), buf.size(), tag, nullptr, nullptr, &req), ncclSuccess);
        int done = 0;
        for (int i = 0; i < 1000; i++) r.plugin.net->test(req, &done, nullptr);
        raise(SIGKILL);
      },
      RunOptions{std::chrono::seconds(90), false, true});
}

TEST(Fault, ReceiverKilledFailsSender) {
  runTwoRanks(
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        ASSERT_TRUE(r.peer.barrier());
        raise(SIGKILL);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        ASSERT_TRUE(r.peer.barrier());
        usleep(200 * 1000);  // the receiver is dead now
        std::vector<uint8_t> buf(16u << 20, 3);
        // Keep sending until the plugin reports the dead peer, from isend or test (bounded).
        auto start = netapi::Clock::now();
        ncclResult_t res = ncclSuccess;
        while (res == ncclSuccess && netapi::Clock::now() - start < kDetectLimit) {
          void* req = nullptr;
          res = r.plugin.net->isend(s, buf.data(), buf.size(), 1, nullptr, nullptr, &req);
          if (res != ncclSuccess || !req) continue;
          int done = 0;
          while (res == ncclSuccess && !done && netapi::Clock::now() - start < kDetectLimit)
            res = r.plugin.net->test(req, &done, nullptr);
        }
        EXPECT_NE(res, ncclSuccess) << "sending to a dead receiver never failed";
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      },
      RunOptions{std::chrono::seconds(90), true, false});
}

}  // namespace
}  // namespace icn::conformance
