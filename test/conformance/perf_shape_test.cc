// The shape of icn-perf's bandwidth loop, the README's main command: a window of 2 or 32 sends in flight, the
// receiver keeping as many receives posted, all of them into ONE buffer, each slot re-posted as soon as it
// completes. Sizes sit on both sides of every threshold that picks a path: UCX's rendezvous threshold (8192 over
// TCP, 8256 over shared memory), the TCP transport's eager limit (ICN_TCP_EAGER_BYTES) and its lane-0 limit
// (ICN_TCP_INLINE_BYTES). The sender's log says which transport and which path its messages took; the counts must
// match the sizes sent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "path_log.h"
#include "two_ranks.h"

namespace icn::conformance {
namespace {

using netapi::checkPattern;
using netapi::fillPattern;

const std::vector<size_t> kShapeSizes = {8, 8191, 8192, 8256, 8257, 16384, 16385, 65536, 65537, (1u << 20) + 3};
constexpr int kWindows[] = {2, 32};
constexpr size_t kShapeMax = (1u << 20) + 3;

int countFor(size_t size) { return size > 65536 ? 24 : 64; }

// One bandwidth point as icn-perf runs it: `window` slots, each re-posted as soon as its request completes.
// post(slot) fills reqs[slot] (may leave it null: retry); done(slot, size) sees each completion.
template <typename Post, typename Done>
void windowLoop(Rank& r, int window, int count, Post post, Done done) {
  std::vector<void*> reqs(static_cast<size_t>(window), nullptr);
  int posted = 0, completed = 0;
  auto deadline = netapi::Clock::now() + kWait;
  while (completed < count) {
    for (int w = 0; w < window; w++) {
      if (reqs[w]) {
        int isDone = 0, size = -1;
        ASSERT_EQ(r.plugin.net->test(reqs[w], &isDone, &size), ncclSuccess) << "window " << window;
        if (!isDone) continue;
        reqs[w] = nullptr;
        completed++;
        done(size);
      }
      if (posted < count) {
        post(&reqs[w]);
        if (reqs[w]) posted++;
      }
    }
    ASSERT_LT(netapi::Clock::now(), deadline) << "window " << window << ": " << completed << " of " << count
                                              << " completed, no progress (the stall icn-perf would show)";
  }
}

TEST(PerfShape, WindowsOfTwoAndThirtyTwoIntoOneBuffer) {
  RunOptions opts;
  opts.env.emplace_back("NCCL_DEBUG", "INFO");  // the path lines below are INFO
  opts.timeout = std::chrono::seconds(300);
  auto out = runTwoRanks(
      [](Rank& r) {  // receiver, like icn-perf's rank 1 in the bandwidth loop
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf(kShapeMax + 1);  // one byte past the largest message: written by nobody
        void* mh = nullptr;
        ASSERT_EQ(r.plugin.net->regMr(rc, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
        for (int window : kWindows) {
          for (size_t size : kShapeSizes) {
            std::fill(buf.begin(), buf.end(), 0xEE);
            ASSERT_TRUE(r.peer.barrier());
            int wrong = 0;
            windowLoop(
                r, window, countFor(size),
                [&](void** req) {
                  void* d = buf.data();
                  size_t n = size;
                  int tag = 0;
                  ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &n, &tag, &mh, nullptr, req), ncclSuccess);
                },
                [&](int got) { wrong += static_cast<size_t>(got) != size; });
            if (::testing::Test::HasFatalFailure()) return;
            EXPECT_EQ(wrong, 0) << "window " << window << ", " << size << " bytes: completions with another size";
            // Every message carries the same bytes, so the shared buffer must hold them whatever the order.
            EXPECT_EQ(checkPattern(buf.data(), size, size), SIZE_MAX) << "window " << window << ", " << size << " B";
            EXPECT_EQ(buf[size], 0xEE) << "window " << window << ", " << size << " B: bytes written past the message";
          }
        }
        EXPECT_EQ(r.plugin.net->deregMr(rc, mh), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
      },
      [](Rank& r) {  // sender
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        std::vector<uint8_t> buf(kShapeMax);
        void* mh = nullptr;
        ASSERT_EQ(r.plugin.net->regMr(s, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
        for (int window : kWindows) {
          for (size_t size : kShapeSizes) {
            fillPattern(buf.data(), size, size);
            ASSERT_TRUE(r.peer.barrier());
            windowLoop(
                r, window, countFor(size),
                [&](void** req) {
                  ASSERT_EQ(r.plugin.net->isend(s, buf.data(), size, 0, mh, nullptr, req), ncclSuccess);
                },
                [&](int got) { EXPECT_EQ(static_cast<size_t>(got), size); });
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
        EXPECT_EQ(r.plugin.net->deregMr(s, mh), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);  // writes the path line
      },
      opts);
  // The sender's log: which transport, which path. Counted from the sizes sent (both windows).
  auto count = [](auto pred) {
    uint64_t n = 0;
    for (size_t size : kShapeSizes)
      if (pred(size)) n += 2u * static_cast<uint64_t>(countFor(size));
    return n;
  };
  const uint64_t all = count([](size_t) { return true; });
  testpair::SendPaths p = testpair::sendPaths(out[1].log);
  printf("PERF-SHAPE: %s\n", testpair::describe(p).c_str());
  const char* want = getenv("ICN_TRANSPORT");
  if (want && (std::string(want) == "tcp" || std::string(want) == "ucx")) {
    EXPECT_EQ(p.transport, want) << "ICN_TRANSPORT=" << want << " but the sender's log says otherwise";
  }
  if (p.transport == "tcp") {
    EXPECT_EQ(p.connections, 1);
    EXPECT_EQ(p.messages, all);
    ASSERT_GT(p.lane0Max, 0u) << "the TCP device line (messages <= N bytes on lane 0) is missing";
    // A message goes before its clear-to-send only when the receiver is behind, so the split between the early
    // paths and the others depends on timing; each path's size range and the total do not.
    const uint64_t big = count([&](size_t s) { return s > p.lane0Max; });
    const uint64_t eligible = count([&](size_t s) { return s <= p.eagerMax; });
    const uint64_t earlyEligible = count([&](size_t s) { return s > p.eagerMax && s <= p.earlyMax; });
    const uint64_t mid = count([&](size_t s) { return s > p.eagerMax && s <= p.lane0Max; });
    const uint64_t beyondEarly = count([&](size_t s) { return s > std::max(p.lane0Max, p.earlyMax); });
    EXPECT_EQ(p.eager + p.early + p.lane0 + p.split, all) << "messages lost between the paths";
    EXPECT_LE(p.eager, eligible) << "a message above the eager limit went eager";
    EXPECT_LE(p.early, earlyEligible) << "a message outside (eager limit, early limit] went early";
    EXPECT_LE(p.earlyLanesUsed, p.earlyLanesAllowed) << "early messages spread over more lanes than allowed";
    EXPECT_LE(p.split, big) << "a message at or below " << p.lane0Max << " B went over the helper lanes";
    EXPECT_GE(p.lane0 + p.eager, eligible + mid - std::min(p.early, mid))
        << "a message at or below the lane-0 limit left lane 0 other than early";
    EXPECT_GT(p.eager, 0u) << "no message took the eager path";
    EXPECT_GT(p.split, 0u) << "no message went over the helper lanes";
    EXPECT_GT(mid, 0u) << "no size between the eager and the lane-0 limits";
    EXPECT_GT(beyondEarly, 0u) << "no size above both the lane-0 and the early limits";
  } else if (p.transport == "ucx") {
    EXPECT_EQ(p.connections, 1);
    EXPECT_EQ(p.messages, all);
    EXPECT_EQ(p.fromRndv, count([&](size_t s) { return s >= p.rndvFrom; }));
    EXPECT_EQ(p.belowRndv, count([&](size_t s) { return s < p.rndvFrom; }));
    EXPECT_GT(p.fromRndv, 0u) << "no size reached UCX's rendezvous threshold (" << p.rndvFrom << " B)";
    EXPECT_GT(p.belowRndv, 0u) << "every size was at or above UCX's rendezvous threshold";
    EXPECT_EQ(testpair::lanesAgainstUcxTls(p), "");
  } else {
    // The verbs transport logs no per-path counts: its connection must at least be there.
    EXPECT_NE(out[1].log.find("send connection"), std::string::npos) << "no send connection in the sender's log";
  }
}

}  // namespace
}  // namespace icn::conformance
