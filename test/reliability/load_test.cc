// Load: 64 comms between two processes, each with 32 requests in flight (the plugin's per-comm maximum), for a
// bounded time (ICN_REL_LOAD_SECONDS, default 10). Sizes are drawn so every path of the transport under test carries
// a good share: tiny and small messages below UCX's rendezvous threshold (8192 B over TCP), 8-16 KiB (UCX
// rendezvous; the TCP transport's eager path), 16-64 KiB (TCP: whole on lane 0) and, on every 8th comm, 64-260 KiB
// (TCP: split over the helper lanes). Every byte is checked: a message landing in the wrong receive, out of order,
// duplicated, truncated or altered fails the test; the sender's log must show each path carrying messages.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <regex>

#include "path_log.h"
#include "ranks.h"

namespace icn::rel {
namespace {

constexpr int kComms = 64;
constexpr int kWindow = 32;     // requests in flight per comm
constexpr int kPerRound = 96;   // messages per comm between two "continue?" decisions
constexpr size_t kMaxMsg = 65536;
constexpr size_t kLargeMax = 260 * 1024;  // above two TCP pieces (ICN_TCP_CHUNK_BYTES, 128 KiB)
constexpr int kTag = 11;

bool largeComm(int comm) { return comm % 8 == 0; }
size_t maxFor(int comm) { return largeComm(comm) ? kLargeMax : kMaxMsg; }

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
size_t msgSize(int comm, uint64_t seq) {
  uint64_t h = mix(uint64_t(comm) * 1000003 + seq);
  switch (seq % 8) {
    case 0: case 1: return h % 64;                            // tiny, including 0 B
    case 2: case 3: return 64 + h % (8192 - 64);              // below UCX's rendezvous threshold
    case 4: return 8192 + h % (16384 - 8192 + 1);             // UCX rendezvous; TCP eager
    case 5: case 6: return 16385 + h % (kMaxMsg - 16384);     // TCP: whole on lane 0
    default:                                                  // TCP: split over the helper lanes
      return largeComm(comm) ? kMaxMsg + 1 + h % (kLargeMax - kMaxMsg) : 16385 + h % (kMaxMsg - 16384);
  }
}
uint64_t msgSeed(int comm, uint64_t seq) { return mix(uint64_t(comm) << 40 | seq); }

int loadSeconds() {
  const char* s = getenv("ICN_REL_LOAD_SECONDS");
  return s ? atoi(s) : 10;
}

struct Slot {
  std::unique_ptr<uint8_t[]> buf;
  void* req = nullptr;
  uint64_t seq = 0;
};

std::vector<std::vector<Slot>> makeSlots() {
  std::vector<std::vector<Slot>> slots(kComms);
  for (int c = 0; c < kComms; c++) {
    slots[c].resize(kWindow);
    for (Slot& s : slots[c]) s.buf.reset(new uint8_t[maxFor(c)]);
  }
  return slots;
}

// Round-robin over all comms until each has moved kPerRound messages, keeping kWindow in flight.
template <typename Post, typename Done>
void runRound(Rank& r, std::vector<void*>& comms, std::vector<std::vector<Slot>>& slots, uint64_t base, Post post,
              Done done) {
  std::vector<int> posted(kComms, 0), completed(kComms, 0);
  int finished = 0;
  auto deadline = netapi::Clock::now() + std::chrono::seconds(120);
  while (finished < kComms) {
    ASSERT_LT(netapi::Clock::now(), deadline) << "a load round made no progress for 120 s";
    for (int c = 0; c < kComms; c++) {
      if (completed[c] == kPerRound) continue;
      while (posted[c] < kPerRound && posted[c] - completed[c] < kWindow) {
        Slot& s = slots[c][posted[c] % kWindow];
        s.seq = base + static_cast<uint64_t>(posted[c]);
        post(c, s);
        if (!s.req) break;  // not accepted now (send side may ask to retry)
        posted[c]++;
      }
      // Requests complete in order per comm (one tag, FIFO matching): test the oldest.
      while (completed[c] < posted[c]) {
        Slot& s = slots[c][completed[c] % kWindow];
        int isDone = 0, size = -1;
        ASSERT_EQ(r.plugin.net->test(s.req, &isDone, &size), ncclSuccess) << "comm " << c << " seq " << s.seq;
        if (!isDone) break;
        done(c, s, size);
        s.req = nullptr;
        if (++completed[c] == kPerRound) finished++;
      }
    }
  }
}

TEST(Load, SixtyFourCommsThirtyTwoInFlightContentChecked) {
  auto out = runPair(
      [](Rank& r) {  // receiver
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
        ASSERT_TRUE(r.peer.send(handle, sizeof handle));
        std::vector<void*> accepted(kComms), comms(kComms, nullptr);
        for (auto& rc : accepted) ASSERT_EQ(netapi::acceptBlocking(r.plugin, l, &rc, kWait), ncclSuccess);
        for (void* rc : accepted) {  // the first message names the comm's index on the sender
          uint32_t id = ~0u;
          void* d = &id;
          size_t sz = sizeof id;
          int tag = 1;
          void* req = nullptr;
          ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
          ASSERT_LT(id, static_cast<uint32_t>(kComms));
          ASSERT_EQ(comms[id], nullptr) << "two comms claim index " << id;
          comms[id] = rc;
        }
        auto slots = makeSlots();
        uint64_t messages = 0, bytes = 0, bad = 0;
        for (uint64_t round = 0;; round++) {
          char go = 0;
          ASSERT_TRUE(r.peer.recv(&go, 1));
          if (go != 'g') break;
          runRound(
              r, comms, slots, round * kPerRound,
              [&](int c, Slot& s) {
                void* d = s.buf.get();
                size_t sz = maxFor(c);
                int tag = kTag;
                memset(s.buf.get(), 0xA5, 64);  // stale bytes from the last use must not pass the check
                ASSERT_EQ(r.plugin.net->irecv(comms[c], 1, &d, &sz, &tag, nullptr, nullptr, &s.req), ncclSuccess);
                ASSERT_NE(s.req, nullptr);
              },
              [&](int c, Slot& s, int size) {
                size_t want = msgSize(c, s.seq);
                bool ok = static_cast<size_t>(size) == want &&
                          netapi::checkPattern(s.buf.get(), want, msgSeed(c, s.seq)) == SIZE_MAX;
                if (!ok && bad++ < 10)
                  ADD_FAILURE() << "comm " << c << " message " << s.seq << ": got " << size << " bytes, want " << want
                                << (static_cast<size_t>(size) == want ? " (content differs)" : "");
                messages++;
                bytes += want;
              });
          if (::testing::Test::HasFatalFailure()) return;
        }
        EXPECT_EQ(bad, 0u);
        EXPECT_GE(messages, uint64_t{kComms} * kPerRound) << "not even one full round";
        printf("LOAD: %d comms x %d in flight: %llu messages, %.1f MiB verified, %llu bad\n", kComms, kWindow,
               static_cast<unsigned long long>(messages), bytes / 1048576.0, static_cast<unsigned long long>(bad));
        ASSERT_TRUE(r.peer.barrier());
        for (void* rc : comms) EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
        EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
      },
      [](Rank& r) {  // sender
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
        std::vector<void*> comms(kComms);
        for (int c = 0; c < kComms; c++) {
          char copy[NCCL_NET_HANDLE_MAXSIZE];
          memcpy(copy, handle, sizeof copy);
          ASSERT_EQ(netapi::connectBlocking(r.plugin, 0, copy, &comms[c], kWait), ncclSuccess);
        }
        for (int c = 0; c < kComms; c++) {
          uint32_t id = static_cast<uint32_t>(c);
          void* req = nullptr;
          while (!req) ASSERT_EQ(r.plugin.net->isend(comms[c], &id, sizeof id, 1, nullptr, nullptr, &req), ncclSuccess);
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
        }
        auto slots = makeSlots();
        uint64_t sent = kComms;  // the index messages
        auto stop = netapi::Clock::now() + std::chrono::seconds(loadSeconds());
        for (uint64_t round = 0;; round++) {
          char go = netapi::Clock::now() < stop || round == 0 ? 'g' : 's';
          ASSERT_TRUE(r.peer.send(&go, 1));
          if (go != 'g') break;
          runRound(
              r, comms, slots, round * kPerRound,
              [&](int c, Slot& s) {
                size_t n = msgSize(c, s.seq);
                netapi::fillPattern(s.buf.get(), n, msgSeed(c, s.seq));
                ASSERT_EQ(r.plugin.net->isend(comms[c], s.buf.get(), n, kTag, nullptr, nullptr, &s.req), ncclSuccess);
              },
              [&](int, Slot&, int) { sent++; });
          if (::testing::Test::HasFatalFailure()) return;
        }
        ASSERT_TRUE(r.peer.barrier());
        for (void* s : comms) EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
        fprintf(stderr, "LOAD: sender completed %llu messages\n", static_cast<unsigned long long>(sent));
      },
      {RankSetup{{{"NCCL_DEBUG", "INFO"}}, {}}, RankSetup{{{"NCCL_DEBUG", "INFO"}}, {}}},
      std::chrono::seconds(loadSeconds() + 240));
  EXPECT_TRUE(out[0].cleanExit());
  EXPECT_TRUE(out[1].cleanExit());
  // Each path of the transport under test carried its share, per the sender's send connections.
  std::smatch m;
  static const std::regex sentRe(R"(LOAD: sender completed (\d+) messages)");
  ASSERT_TRUE(std::regex_search(out[1].log, m, sentRe)) << "the sender did not report its count";
  const uint64_t sent = std::stoull(m[1]);
  testpair::SendPaths p = testpair::sendPaths(out[1].log);
  printf("LOAD paths: %s\n", testpair::describe(p).c_str());
  EXPECT_EQ(p.connections, kComms);
  EXPECT_EQ(p.messages, sent);
  const char* want = getenv("ICN_TRANSPORT");
  if (want && (std::string(want) == "tcp" || std::string(want) == "ucx")) {
    EXPECT_EQ(p.transport, want) << "ICN_TRANSPORT=" << want << " but the sender's log says otherwise";
  }
  if (p.transport == "tcp") {
    EXPECT_GT(p.eager, 0u) << "no message took the eager path";
    EXPECT_GT(p.lane0, p.messages / 20) << "lane 0 carried too few messages";
    EXPECT_GT(p.split + p.early, p.messages / 200) << "too few messages went over the helper lanes";
  } else if (p.transport == "ucx") {
    EXPECT_GT(p.belowRndv, p.messages / 4) << "too few messages below UCX's rendezvous threshold";
    EXPECT_GT(p.fromRndv, p.messages / 4) << "too few messages by rendezvous";
    EXPECT_EQ(testpair::lanesAgainstUcxTls(p), "");
  } else {
    ADD_FAILURE() << "the sender's log names no transport's path counts";
  }
}

}  // namespace
}  // namespace icn::rel
