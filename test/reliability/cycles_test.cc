// Leaks: many listen/connect/transfer/close cycles (ICN_REL_CYCLES, default 1000) in one pair of processes.
// After a warm-up the open descriptor count must not move at all and the resident set may grow by at most
// kRssSlackKiB in total (allocator noise), on both ranks.
#include <gtest/gtest.h>

#include <thread>

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "ranks.h"

namespace icn::rel {
namespace {

constexpr int kWarmup = 100;
constexpr long kRssSlackKiB = 4096;

int cycles() {
  const char* s = getenv("ICN_REL_CYCLES");
  return s ? atoi(s) : 1000;
}

struct Usage {
  int fds = 0;
  long rss = 0;
  long heap = 0;  // malloc'd bytes in use (KiB): tells allocator growth from memory held outside malloc
};

// Closes return at once and finish (flush, release) on later calls into the plugin or at finalize, as
// NCCL's communicator destroy ends with it: the last sample is taken after finalize.
void quiesce(Rank& r) {
  ASSERT_EQ(r.plugin.net->finalize(r.plugin.ctx), ncclSuccess);
  r.plugin.ctx = nullptr;
}

// Closes return at once and release their resources in the background: sample once the descriptor
// count has stopped moving (three equal readings 20 ms apart, at most 3 s). The heap's free pages go back to the
// system first: memory freed but kept by the allocator (more of it after a busy warm-up) is not growth.
Usage usage() {
  int fds = openFds(), same = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
       same < 2 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    int now = openFds();
    same = now == fds ? same + 1 : 0;
    fds = now;
  }
  malloc_trim(0);
  return {fds, rssKiB(), static_cast<long>(mallinfo2().uordblks / 1024)};
}

void report(Rank& r, const Usage& warm, const Usage& end, int n) {
  printf("CYCLES rank %d: %d cycles, fds %d -> %d, rss %ld -> %ld KiB (%+ld KiB after warm-up), malloc in use %ld -> %ld KiB\n",
         r.rank, n, warm.fds, end.fds, warm.rss, end.rss, end.rss - warm.rss, warm.heap, end.heap);
  EXPECT_LE(end.fds, warm.fds) << "file descriptors leak";
  EXPECT_LE(end.rss - warm.rss, kRssSlackKiB) << "memory grows with connect/close cycles";
}

const size_t kSizes[] = {4096, 256 * 1024};
// Closing never waits for the peer (testpair::closeBound()). Judged on the 99th percentile: a single close may
// lose the CPU to another process on a loaded machine.

void expectQuickCloses(const Rank& r, std::vector<double> ms) {
  ASSERT_FALSE(ms.empty());
  std::sort(ms.begin(), ms.end());
  double p99 = ms[ms.size() * 99 / 100], median = ms[ms.size() / 2];
  printf("CYCLES rank %d: close median %.2f ms, p99 %.2f ms, slowest %.1f ms\n", r.rank, median, p99, ms.back());
  EXPECT_LT(p99, static_cast<double>(testpair::closeBound().count())) << "closes wait for the peer";
}

TEST(Leaks, ConnectTransferCloseCyclesKeepFdsAndMemoryFlat) {
  const int n = cycles();
  ASSERT_GT(n, kWarmup);
  auto out = runPair(
      [n](Rank& r) {
        Usage warm, end;
        std::vector<double> closeMs;
        std::vector<uint8_t> buf(256 * 1024);
        for (int i = 0; i < n; i++) {
          if (i == kWarmup) warm = usage();
          char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
          void *l = nullptr, *rc = nullptr;
          ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
          ASSERT_TRUE(r.peer.send(handle, sizeof handle));
          ASSERT_EQ(netapi::acceptBlocking(r.plugin, l, &rc, kWait), ncclSuccess) << "cycle " << i;
          for (size_t k = 0; k < 2; k++) {
            void* d = buf.data();
            size_t sz = buf.size();
            int tag = static_cast<int>(k);
            void* req = nullptr;
            ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
            int got = 0;
            ASSERT_EQ(netapi::waitRequest(r.plugin, req, &got, kWait), ncclSuccess) << "cycle " << i;
            ASSERT_EQ(static_cast<size_t>(got), kSizes[k]);
            ASSERT_EQ(netapi::checkPattern(buf.data(), kSizes[k], uint64_t(i) * 2 + k), SIZE_MAX) << "cycle " << i;
          }
          // Both ranks close at once, as NCCL's teardown does. Alternate the order of the listen and receive comms.
          auto t0 = netapi::Clock::now();
          if (i % 2) {
            ASSERT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
          }
          ASSERT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
          if (!(i % 2)) {
            ASSERT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
          }
          closeMs.push_back(std::chrono::duration<double, std::milli>(netapi::Clock::now() - t0).count());
        }
        quiesce(r);
        end = usage();
        report(r, warm, end, n);
        expectQuickCloses(r, closeMs);
      },
      [n](Rank& r) {
        Usage warm, end;
        std::vector<double> closeMs;
        std::vector<uint8_t> buf(256 * 1024);
        for (int i = 0; i < n; i++) {
          if (i == kWarmup) warm = usage();
          char handle[NCCL_NET_HANDLE_MAXSIZE];
          ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
          void* s = nullptr;
          ASSERT_EQ(netapi::connectBlocking(r.plugin, 0, handle, &s, kWait), ncclSuccess) << "cycle " << i;
          for (size_t k = 0; k < 2; k++) {
            netapi::fillPattern(buf.data(), kSizes[k], uint64_t(i) * 2 + k);
            void* req = nullptr;
            while (!req)
              ASSERT_EQ(r.plugin.net->isend(s, buf.data(), kSizes[k], static_cast<int>(k), nullptr, nullptr, &req),
                        ncclSuccess);
            ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess) << "cycle " << i;
          }
          auto t0 = netapi::Clock::now();
          ASSERT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
          closeMs.push_back(std::chrono::duration<double, std::milli>(netapi::Clock::now() - t0).count());
        }
        quiesce(r);
        end = usage();
        report(r, warm, end, n);
        expectQuickCloses(r, closeMs);
      },
      {}, std::chrono::seconds(900));
  EXPECT_TRUE(out[0].cleanExit());
  EXPECT_TRUE(out[1].cleanExit());
}

}  // namespace
}  // namespace icn::rel
