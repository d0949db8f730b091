// Leaks: many listen/connect/transfer/close cycles (ICN_REL_CYCLES, default 1000) in one pair of processes.
// After a warm-up the open descriptor count must not move at all and the resident set may grow by at most
// kRssSlackKiB in total (allocator noise), on both ranks.
#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdlib>

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

Usage usage() { return {openFds(), rssKiB(), static_cast<long>(mallinfo2().uordblks / 1024)}; }

void report(Rank& r, const Usage& warm, const Usage& end, int n) {
  printf("CYCLES rank %d: %d cycles, fds %d -> %d, rss %ld -> %ld KiB (%+ld KiB after warm-up), malloc in use %ld -> %ld KiB\n",
         r.rank, n, warm.fds, end.fds, warm.rss, end.rss, end.rss - warm.rss, warm.heap, end.heap);
  EXPECT_EQ(end.fds, warm.fds) << "file descriptors leak";
  EXPECT_LE(end.rss - warm.rss, kRssSlackKiB) << "memory grows with connect/close cycles";
}

const size_t kSizes[] = {4096, 256 * 1024};

TEST(Leaks, ConnectTransferCloseCyclesKeepFdsAndMemoryFlat) {
  const int n = cycles();
  ASSERT_GT(n, kWarmup);
  auto out = runPair(
      [n](Rank& r) {
        Usage warm, end;
        double closeMs = 0;
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
          // Both ranks close at once, as NCCL's teardown does (a close waits, bounded, for the peer to progress;
          // see docs/readme/reliability.md). Alternate the order of the listen and receive comms.
          auto t0 = netapi::Clock::now();
          if (i % 2) {
            ASSERT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
          }
          ASSERT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
          if (!(i % 2)) {
            ASSERT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
          }
          closeMs = std::max(closeMs, std::chrono::duration<double, std::milli>(netapi::Clock::now() - t0).count());
        }
        end = usage();
        report(r, warm, end, n);
        printf("CYCLES rank %d: slowest close %.1f ms\n", r.rank, closeMs);
      },
      [n](Rank& r) {
        Usage warm, end;
        double closeMs = 0;
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
          closeMs = std::max(closeMs, std::chrono::duration<double, std::milli>(netapi::Clock::now() - t0).count());
        }
        end = usage();
        report(r, warm, end, n);
        printf("CYCLES rank %d: slowest close %.1f ms\n", r.rank, closeMs);
      },
      {}, std::chrono::seconds(900));
  EXPECT_TRUE(out[0].cleanExit());
  EXPECT_TRUE(out[1].cleanExit());
}

}  // namespace
}  // namespace icn::rel
