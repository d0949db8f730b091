// The TCP send comm against a scripted receiver: the test holds the far ends of socketpairs standing in for the
// control socket and the lanes, reads what the comm sends and writes the clear-to-send records a correct, buggy or
// hostile receiver would. Every bad record must fail the connection with a WARN naming the peer.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <regex>
#include <thread>
#include <vector>

#include "diagnose/registry.h"
#include "tcp_test_wire.h"

namespace icn::tcp {
namespace {
using namespace testwire;

class SendSide : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::installLogCapture();
    testing::takeWarnings();
    wires.comm.eagerBytes = 2048;
    comm = std::make_unique<TcpSendComm>(std::move(wires.comm), kPeer, NetCommInfo{});
  }
  void postCts(uint32_t seq, uint8_t slot, std::vector<CtsEntry> entries, uint8_t credits = 0, uint8_t early = 0) {
    auto bytes = ctsRecord(seq, slot, entries, credits, early);
    writeAll(wires.lane(0), bytes.data(), bytes.size());
  }
  // Records to write in one go: a socket pair holds far fewer small writes than bytes.
  static std::vector<uint8_t> ctsRecord(uint32_t seq, uint8_t slot, const std::vector<CtsEntry>& entries,
                                        uint8_t credits = 0, uint8_t early = 0) {
    CtsHeader h;
    h.seq = seq;
    h.slot = slot;
    h.credits = credits;
    h.earlyCredits = early;
    h.n = static_cast<uint8_t>(entries.size());
    std::vector<uint8_t> out(sizeof h + entries.size() * sizeof(CtsEntry));
    memcpy(out.data(), &h, sizeof h);
    memcpy(out.data() + sizeof h, entries.data(), entries.size() * sizeof(CtsEntry));
    return out;
  }
  // A 20-byte send with `tag`, queued until a clear-to-send record with its tag arrives.
  Request* queuedSend(int tag) {
    Request* r = nullptr;
    EXPECT_EQ(comm->isend(small.data(), small.size(), tag, nullptr, &r), Status::Ok);
    EXPECT_NE(r, nullptr);
    return r;
  }
  // The request fails with a remote error and a WARN naming the peer and saying `what`.
  void expectRemoteFailure(Request* r, const char* what) {
    ASSERT_NE(r, nullptr) << "isend refused the send";
    EXPECT_EQ(finish(r), Status::RemoteError);
    EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer, what}));
  }
  Wires wires{2};
  std::unique_ptr<TcpSendComm> comm;
  std::vector<uint8_t> small = pattern(20);
};

TEST_F(SendSide, LargeMessageIsSplitAcrossHelperLanes) {
  const size_t n = 1 << 20;
  auto data = pattern(n);
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), n, 3, nullptr, &r), Status::Ok);
  ASSERT_NE(r, nullptr);
  postCts(0, 5, {{3, 2u << 20}});
  std::vector<uint8_t> got(n, 0);
  uint64_t covered = 0;
  std::thread reader([&] {  // the socketpairs hold far less than a piece: read while the helpers write
    for (int lane = 1; lane <= 2; lane++) {
      ChunkHeader h;
      ASSERT_TRUE(readAll(wires.lane(lane), &h, sizeof h)) << "no piece on helper lane " << lane;
      EXPECT_EQ(h.magic, kChunkMagic);
      EXPECT_EQ(h.seq, 0u);
      EXPECT_EQ(h.slot, 5);
      EXPECT_EQ(h.tag, 3);
      EXPECT_EQ(h.total, n);
      ASSERT_LE(uint64_t{h.offset} + h.length, n);
      ASSERT_TRUE(readAll(wires.lane(lane), got.data() + h.offset, h.length));
      covered += h.length;
    }
  });
  EXPECT_EQ(finish(r), Status::Ok);
  reader.join();
  EXPECT_EQ(covered, n);
  EXPECT_EQ(got, data);
}

TEST_F(SendSide, SmallMessageGoesWholeOnLaneZero) {
  auto data = pattern(100);
  postCts(0, 0, {{1, 4096}});
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), 100, 1, nullptr, &r), Status::Ok);
  ASSERT_EQ(finish(r), Status::Ok);
  ChunkHeader h;
  ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
  EXPECT_EQ(h.total, 100u);
  EXPECT_EQ(h.length, 100u);
  std::vector<uint8_t> got(100);
  ASSERT_TRUE(readAll(wires.lane(0), got.data(), got.size()));
  EXPECT_EQ(got, data);
}

TEST_F(SendSide, SmallMessagesGoEagerOnlyAfterTheFirstRecordAndSettleLaterRecords) {
  auto data = pattern(100);
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), 100, 1, nullptr, &r), Status::Ok);
  bool done = false;
  ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
  EXPECT_FALSE(done) << "nothing may be written on lane 0 before the receiver's first record";
  postCts(0, 0, {{1, 4096}});
  ASSERT_EQ(finish(r), Status::Ok);
  ChunkHeader h;
  ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
  EXPECT_EQ(h.flags, 0);
  std::vector<uint8_t> got(100);
  ASSERT_TRUE(readAll(wires.lane(0), got.data(), 100));
  // Every record read is used up: the next small sends leave at once, before their records.
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(comm->isend(data.data(), 100, 1, nullptr, &r), Status::Ok);
    ASSERT_EQ(finish(r), Status::Ok);
    ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
    EXPECT_EQ(h.flags, kChunkEager);
    EXPECT_EQ(h.seq, 1u) << "horizon: one record read";
    ASSERT_TRUE(readAll(wires.lane(0), got.data(), 100));
    EXPECT_EQ(got, data);
  }
  // Their records arrive later; a send too large to go eager must take the record after them.
  const size_t bigBytes = std::max<size_t>(1 << 18, currentTuning().laneEagerBytes + 1);
  postCts(1, 1, {{1, 4096}});
  postCts(2, 2, {{1, 4096}});
  postCts(3, 3, {{1, 4096}});
  postCts(4, 4, {{1, static_cast<uint32_t>(bigBytes)}});
  std::vector<uint8_t> big(bigBytes, 3);
  ASSERT_EQ(comm->isend(big.data(), big.size(), 1, nullptr, &r), Status::Ok);
  std::thread reader([&] {
    for (int lane = 1; lane <= 2; lane++) {
      ChunkHeader p;
      ASSERT_TRUE(readAll(wires.lane(lane), &p, sizeof p));
      EXPECT_EQ(p.seq, 4u);
      EXPECT_EQ(p.slot, 4);
      std::vector<uint8_t> sink(p.length);
      ASSERT_TRUE(readAll(wires.lane(lane), sink.data(), p.length));
    }
  });
  EXPECT_EQ(finish(r), Status::Ok);
  reader.join();
}

TEST_F(SendSide, LargeEagerMessageGoesWholeOnAHelperLaneThatOtherPiecesAvoid) {
  ASSERT_GE(currentTuning().laneEagerBytes, size_t{1} << 16) << "helper-lane eager messages are off";
  auto data = pattern(1 << 16);
  Request* r = nullptr;
  postCts(0, 0, {{1, 16}});  // the first record, used up by a small send
  ASSERT_EQ(comm->isend(data.data(), 16, 1, nullptr, &r), Status::Ok);
  ASSERT_EQ(finish(r), Status::Ok);
  ChunkHeader h;
  std::vector<uint8_t> got(1 << 16);
  ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
  ASSERT_TRUE(readAll(wires.lane(0), got.data(), 16));
  // A large send with no record to take leaves at once, whole, on one helper lane.
  ASSERT_EQ(comm->isend(data.data(), data.size(), 1, nullptr, &r), Status::Ok);
  int held = -1;
  std::thread reader([&] {
    for (auto deadline = Clock::now() + std::chrono::seconds(10); held < 0 && Clock::now() < deadline;)
      for (int lane = 1; lane <= 2 && held < 0; lane++) {
        pollfd q{wires.lane(lane), POLLIN, 0};
        if (::poll(&q, 1, 10) > 0) held = lane;
      }
    ASSERT_GT(held, 0);
    ASSERT_TRUE(readAll(wires.lane(held), &h, sizeof h));
    ASSERT_TRUE(readAll(wires.lane(held), got.data(), got.size()));
  });
  ASSERT_EQ(finish(r), Status::Ok) << "an eager send completes before its record";
  reader.join();
  EXPECT_EQ(h.flags, kChunkEager);
  EXPECT_EQ(h.seq, 1u);
  EXPECT_EQ(h.eager, 0u) << "the first eager message (the small send took record 0)";
  EXPECT_EQ(h.total, data.size());
  EXPECT_EQ(h.length, data.size());
  EXPECT_EQ(got, data);
  // While its record is unread, a send with another tag waits for its own record, and its pieces avoid the lane
  // the receiver may be holding.
  std::vector<uint8_t> big(1 << 18, 3);
  ASSERT_EQ(comm->isend(big.data(), big.size(), 2, nullptr, &r), Status::Ok);
  bool done = false;
  ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
  EXPECT_FALSE(done) << "another tag went eager while a held lane waits";
  postCts(1, 1, {{2, 1 << 18}});
  const int other = held == 1 ? 2 : 1;
  std::thread reader2([&] {
    ChunkHeader p;
    ASSERT_TRUE(readAll(wires.lane(other), &p, sizeof p));
    EXPECT_EQ(p.flags, 0);
    EXPECT_EQ(p.seq, 1u);
    EXPECT_EQ(p.length, 1u << 18) << "the whole message on the one clean lane";
    std::vector<uint8_t> sink(p.length);
    ASSERT_TRUE(readAll(wires.lane(other), sink.data(), p.length));
  });
  EXPECT_EQ(finish(r), Status::Ok);
  reader2.join();
  pollfd q{wires.lane(held), POLLIN, 0};
  EXPECT_EQ(::poll(&q, 1, 50), 0) << "a piece queued behind the held eager message";
}

// A receiver that posts nothing (its process is off the GPU) lets a sender run ahead by every credit, and no
// further: the next message waits for a record, and the close line counts the wait.
TEST_F(SendSide, RunsAheadOfAReceiverThatPostsNothingByEveryCreditAndNoFurther) {
  // NCCL's default step is 128 KiB; a sender on a GPU shared with its receiver stalled with 4 MiB ahead.
  EXPECT_GE(size_t{kEarlyCredits} * (128 << 10), size_t{16} << 20) << "the window a shared-GPU alltoall needs";
  const size_t n = 1 << 16;
  ASSERT_GE(currentTuning().laneEagerBytes, n) << "helper-lane eager messages are off";
  auto data = pattern(n);
  postCts(0, 0, {{1, 16}});  // the first record, used up by a small send
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), 16, 1, nullptr, &r), Status::Ok);
  ASSERT_EQ(finish(r), Status::Ok);
  {
    ChunkHeader h;
    uint8_t got[16];
    ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
    ASSERT_TRUE(readAll(wires.lane(0), got, sizeof got));
  }
  std::atomic<size_t> early{0};
  std::atomic<bool> stop{false};
  std::vector<bool> seen(kEarlyCredits, false);
  std::thread reader([&] {  // drains the helper lanes as a receiver's kernel buffers would hold them
    std::vector<uint8_t> sink(n);
    int64_t last[3] = {-1, -1, -1};
    while (!stop) {
      for (int lane = 1; lane <= 2; lane++) {
        pollfd q{wires.lane(lane), POLLIN, 0};
        if (::poll(&q, 1, 5) <= 0) continue;
        ChunkHeader h;
        ASSERT_TRUE(readAll(wires.lane(lane), &h, sizeof h));
        ASSERT_EQ(h.flags, kChunkEager);
        ASSERT_GT(int64_t{h.eager}, last[lane]) << "each lane carries its eager messages in number order";
        ASSERT_LT(h.eager, kEarlyCredits);
        last[lane] = h.eager;
        seen[h.eager] = true;
        ASSERT_TRUE(readAll(wires.lane(lane), sink.data(), h.length));
        early++;
      }
    }
  });
  std::vector<Request*> ahead;
  for (uint32_t i = 0; i < kEarlyCredits; i++) {
    ASSERT_EQ(comm->isend(data.data(), n, 1, nullptr, &r), Status::Ok);
    ASSERT_EQ(finish(r), Status::Ok) << "send " << i << " of " << kEarlyCredits << " did not leave early";
  }
  Request* waiting = nullptr;
  ASSERT_EQ(comm->isend(data.data(), n, 1, nullptr, &waiting), Status::Ok);
  bool done = false;
  for (int k = 0; k < 20 && !done; k++, usleep(1000)) ASSERT_EQ(waiting->test(&done, nullptr), Status::Ok);
  EXPECT_FALSE(done) << "a send left early with every credit spent";
  // The receiver posts a receive for each early message (handing its credit back), then one more: the waiting
  // send is the next message with its tag, so that one is its.
  const uint32_t last = kEarlyCredits + 1;
  std::vector<uint8_t> records;
  for (uint32_t seq = 1; seq <= last; seq++) {
    auto record = ctsRecord(seq, static_cast<uint8_t>(seq % kMaxRequests), {{1, static_cast<uint32_t>(n)}}, 0,
                            seq < last ? 1 : 0);
    records.insert(records.end(), record.begin(), record.end());
  }
  writeAll(wires.lane(0), records.data(), records.size());
  std::thread matched([&] {  // small enough for lane 0: it goes there, against the last record
    ChunkHeader h;
    std::vector<uint8_t> got(n);
    ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
    EXPECT_EQ(h.flags, 0);
    EXPECT_EQ(h.seq, last);
    EXPECT_EQ(h.index, 0);
    ASSERT_EQ(h.length, n);
    ASSERT_TRUE(readAll(wires.lane(0), got.data(), n));
    EXPECT_EQ(got, data);
  });
  EXPECT_EQ(finish(waiting), Status::Ok);
  matched.join();
  stop = true;
  reader.join();
  EXPECT_EQ(early.load(), kEarlyCredits);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), kEarlyCredits) << "every eager number exactly once";
  const std::string line = closeLine(comm);
  EXPECT_NE(line.find(std::to_string(kEarlyCredits) + " early"), std::string::npos) << line;
  EXPECT_NE(line.find("1 large ones waited for an eager credit"), std::string::npos) << line;
  EXPECT_NE(line.find("at most 2 of 2 lanes at once"), std::string::npos) << "spread over both helper lanes";
}

// A receiver that reads nothing for 30 ms makes the helper lanes wait for socket space; the close line says
// how often and how long.
TEST_F(SendSide, CloseLineCountsTheWaitsForSocketSpace) {
  const size_t n = 4 << 20;  // far more than a socket pair holds
  auto data = pattern(n);
  postCts(0, 0, {{1, static_cast<uint32_t>(n)}});
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), n, 1, nullptr, &r), Status::Ok);
  usleep(30000);
  std::vector<std::thread> readers;
  for (int lane = 1; lane <= 2; lane++)
    readers.emplace_back([&, lane] {
      ChunkHeader h;
      ASSERT_TRUE(readAll(wires.lane(lane), &h, sizeof h));
      std::vector<uint8_t> sink(h.length);
      ASSERT_TRUE(readAll(wires.lane(lane), sink.data(), h.length));
    });
  EXPECT_EQ(finish(r), Status::Ok);
  for (auto& t : readers) t.join();
  const auto waits = waitsIn(closeLine(comm), std::regex(R"(waited for socket space (\d+) times, ([\d.]+) ms in all)"));
  EXPECT_TRUE(waits) << "no close line with the waits for socket space";
  if (waits) {
    EXPECT_GE(waits->count, 2) << "each of the two lanes waited";
    EXPECT_GE(waits->ms, 40.0) << "two lanes, 30 ms each at least";
  }
}

TEST_F(SendSide, SendLargerThanThePostedReceiveFails) {
  auto data = pattern(20);
  postCts(0, 0, {{1, 10}});
  Request* r = nullptr;
  Status st = comm->isend(data.data(), 20, 1, nullptr, &r);
  if (st == Status::Ok && r) st = finish(r);
  EXPECT_EQ(st, Status::InvalidUsage);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer, "exceeds the 10 bytes the receiver posted"}));
}

TEST_F(SendSide, ClearToSendOutOfOrderFails) {
  Request* r = queuedSend(1);
  postCts(4, 0, {{1, 100}});
  expectRemoteFailure(r, "out of order");
}

TEST_F(SendSide, ClearToSendWithTooManyReceivesFails) {
  Request* r = queuedSend(1);
  std::vector<CtsEntry> nine(9, CtsEntry{1, 100});
  postCts(0, 0, nine);
  expectRemoteFailure(r, "9 receives");
}

// A receiver that hands back eager credits the sender never spent would let it send without bound.
TEST_F(SendSide, ClearToSendReturningUnspentCreditsFails) {
  Request* r = queuedSend(1);
  postCts(0, 0, {{1, 100}}, 1);
  expectRemoteFailure(r, "hands back more eager credits than were spent");
}

TEST_F(SendSide, ClearToSendReturningUnspentEarlyCreditsFails) {
  Request* r = queuedSend(1);
  postCts(0, 0, {{1, 100}}, 0, 1);
  expectRemoteFailure(r, "hands back more eager credits than were spent");
}

// Records the sender keeps until sends match them: a receiver posting more than it may at once is refused
// before the sender's ring of records could overflow.
TEST_F(SendSide, ClearToSendFloodFails) {
  Request* r = queuedSend(9);  // matches none of the records
  std::vector<uint8_t> flood;
  for (uint32_t seq = 0; seq <= kMaxRequests + kEagerWindow; seq++) {
    auto record = ctsRecord(seq, static_cast<uint8_t>(seq % kMaxRequests), {{1, 100}});
    flood.insert(flood.end(), record.begin(), record.end());
  }
  writeAll(wires.lane(0), flood.data(), flood.size());
  expectRemoteFailure(r, "receives posted at once");
}

TEST_F(SendSide, GarbageInsteadOfAClearToSendFails) {
  Request* r = queuedSend(1);
  std::vector<uint8_t> junk(64, 0x5A);
  writeAll(wires.lane(0), junk.data(), junk.size());
  expectRemoteFailure(r, "garbage where a clear-to-send record was expected");
}

TEST_F(SendSide, ReceiverClosingFailsQueuedSend) {
  Request* r = queuedSend(1);
  wires.peer.clear();
  expectRemoteFailure(r, "peer closed the connection");
}

// The diagnosis's wire measure over real TCP sockets: what the helper lanes' peers acknowledged, over their busy
// time. Lane 0 is left out where there are helper lanes: it carries the small messages one at a time and is busy at
// the application's pace, which would bring the link's rate down to it.
class SendSideOverTcp : public SendSide {
 protected:
  void SetUp() override {
    const size_t before = diagnose::links::all().size();
    wires = Wires(2, true);
    SendSide::SetUp();
    const auto all = diagnose::links::all();
    ASSERT_EQ(all.size(), before + 1) << "the comm registered no link monitor";
    monitor = all.back();
  }
  // Drains the peer's end of `lane` until stop, 64 KiB a millisecond: slow enough for the sender's socket to stay
  // busy for many of the kernel's jiffies. Counts what it read into `total`.
  void slowReader(int lane, std::atomic<size_t>* total) {
    readers.emplace_back([this, fd = wires.lane(lane), total] {
      std::vector<uint8_t> buf(1 << 16);
      while (!stop.load()) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 10) <= 0) continue;
        const ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
        if (r <= 0) return;
        *total += static_cast<size_t>(r);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  std::atomic<bool> stop{false};
  void TearDown() override {
    stop = true;
    for (std::thread& t : readers) t.join();
  }
  std::vector<std::thread> readers;
  std::shared_ptr<diagnose::LinkMonitor> monitor;
};

TEST_F(SendSideOverTcp, WireMeasureCountsTheHelperLanesAndNotLaneZero) {
  TcpBusy probe;
  if (!tcpBusy(wires.lane(1), &probe))
    GTEST_SKIP() << "this kernel's TCP_INFO has no busy time (Linux < 4.10)";
  const size_t bigBytes = 16u << 20, smallBytes = 60u << 10;
  constexpr uint32_t kSmall = 24;
  const auto bigData = pattern(bigBytes), smallData = pattern(smallBytes);
  std::atomic<size_t> onHelpers{0}, onLane0{0};
  slowReader(1, &onHelpers);
  slowReader(2, &onHelpers);
  slowReader(0, &onLane0);
  Request* r = nullptr;
  postCts(0, 1, {{3, static_cast<uint32_t>(bigBytes)}});
  ASSERT_EQ(comm->isend(const_cast<uint8_t*>(bigData.data()), bigBytes, 3, nullptr, &r), Status::Ok);
  ASSERT_EQ(finish(r), Status::Ok);
  for (uint32_t i = 1; i <= kSmall; i++) {  // lane 0 busy too, while the helper lanes drain
    postCts(i, static_cast<uint8_t>(1 + i % 8), {{4, static_cast<uint32_t>(smallBytes)}});
    ASSERT_EQ(comm->isend(const_cast<uint8_t*>(smallData.data()), smallBytes, 4, nullptr, &r), Status::Ok);
    ASSERT_EQ(finish(r), Status::Ok);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while ((onHelpers.load() < bigBytes + sizeof(ChunkHeader) || onLane0.load() < kSmall * smallBytes) &&
         Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(onHelpers.load(), bigBytes + sizeof(ChunkHeader)) << "the helper lanes' bytes did not all arrive";
  ASSERT_GE(onLane0.load(), kSmall * smallBytes) << "lane 0's bytes did not all arrive";
  // A send (past the eager size: it waits for its record) looks at the lanes at most every 10 ms: a few more after
  // everything arrived read what was acknowledged since the last look.
  for (uint32_t i = kSmall + 1; i <= kSmall + 4; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    postCts(i, static_cast<uint8_t>(1 + i % 8), {{5, 4096}});
    ASSERT_EQ(comm->isend(const_cast<uint8_t*>(smallData.data()), 4096, 5, nullptr, &r), Status::Ok);
    ASSERT_EQ(finish(r), Status::Ok);
  }
  EXPECT_GE(monitor->wireBytes(), bigBytes) << "the helper lanes' bytes were not all counted";
  EXPECT_LE(monitor->wireBytes(), onHelpers.load()) << "lane 0's bytes were counted";
  EXPECT_GT(monitor->wireNs(), 0u);
}

// A receiver that stops reading (ICN_PEER_TIMEOUT_MS short here). Pieces matched to its records, and eager
// messages whose records have arrived since, are what it must be reading; eager messages whose receives it has
// not posted may wait in its socket for as long as it does not post them.
class SendSideStoppedReader : public SendSide {
 protected:
  void SetUp() override {
    testing::setEnvAndReload("ICN_PEER_TIMEOUT_MS", "300");
    SendSide::SetUp();
  }
  void TearDown() override { testing::setEnvAndReload("ICN_PEER_TIMEOUT_MS", nullptr); }
  // Ends a send that must fail: the status, and the time it took.
  Status failed(Request* r, double* ms) {
    const auto t0 = Clock::now();
    Status st = finish(r);
    *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return st;
  }
  // The first record, used up by a small send that goes on lane 0 (read here): later sends may go eager.
  void firstRecordUsed() {
    postCts(0, 0, {{1, 16}});
    Request* r = nullptr;
    ASSERT_EQ(comm->isend(small.data(), 16, 1, nullptr, &r), Status::Ok);
    ASSERT_EQ(finish(r), Status::Ok);
    ChunkHeader h;
    uint8_t got[16];
    ASSERT_TRUE(readAll(wires.lane(0), &h, sizeof h));
    ASSERT_TRUE(readAll(wires.lane(0), got, sizeof got));
  }
};

TEST_F(SendSideStoppedReader, ReceiverThatStopsReadingAHelperLaneFails) {
  const size_t n = 4 << 20;  // far more than a socket pair holds
  std::vector<uint8_t> data(n, 1);
  const size_t heap = heapInUse();
  postCts(0, 0, {{1, static_cast<uint32_t>(n)}});
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), n, 1, nullptr, &r), Status::Ok);
  double ms = 0;
  EXPECT_EQ(failed(r, &ms), Status::RemoteError);
  EXPECT_GE(ms, 250.0) << "failed before ICN_PEER_TIMEOUT_MS";
  EXPECT_LT(ms, 3000.0);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(),
                              {kPeer, "the peer stopped reading lane", "nothing of a message whose receive it posted"}));
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
  comm.reset();  // as NCCL does, the send's buffer outlives the comm: closing stops the helper that read it
}

TEST_F(SendSideStoppedReader, ReceiverThatStopsReadingLaneZeroFails) {
  const uint32_t n = static_cast<uint32_t>(currentTuning().inlineBytes);  // whole on lane 0
  ASSERT_GE(n, 4096u);
  const int count = static_cast<int>((1 << 20) / n) + 1;  // more than a socket pair holds
  ASSERT_LE(count, kMaxRequests * kMaxRecvs);
  std::vector<uint8_t> records;
  for (int i = 0; i < count; i++) {
    auto record = ctsRecord(static_cast<uint32_t>(i), static_cast<uint8_t>(i % kMaxRequests), {{1, n}});
    records.insert(records.end(), record.begin(), record.end());
  }
  writeAll(wires.lane(0), records.data(), records.size());
  std::vector<uint8_t> data(n, 2);
  std::vector<Request*> sends;
  sends.reserve(static_cast<size_t>(count));
  const size_t heap = heapInUse();
  for (int i = 0; i < count; i++) {
    Request* r = nullptr;
    ASSERT_EQ(comm->isend(data.data(), n, 1, nullptr, &r), Status::Ok);
    ASSERT_NE(r, nullptr);
    sends.push_back(r);
  }
  double ms = 0;
  EXPECT_EQ(failed(sends.back(), &ms), Status::RemoteError);
  EXPECT_LT(ms, 3000.0);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer, "the peer stopped reading lane 0"}));
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
}

TEST_F(SendSideStoppedReader, EagerMessageWaitsInTheSocketWhileItsReceiveIsNotPosted) {
  ASSERT_GE(currentTuning().laneEagerBytes, size_t{1} << 20) << "helper-lane eager messages are off";
  firstRecordUsed();
  std::vector<uint8_t> data(1 << 20, 3);  // more than a socket pair holds: the lane waits for space
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), data.size(), 1, nullptr, &r), Status::Ok);
  const auto until = Clock::now() + std::chrono::milliseconds(1000);  // three times the limit
  while (Clock::now() < until) {
    bool done = false;
    ASSERT_EQ(r->test(&done, nullptr), Status::Ok) << "failed a receiver that has not posted the receive";
    ASSERT_FALSE(done);
    usleep(5000);
  }
  EXPECT_TRUE(testing::takeWarnings().empty());
  std::thread reader([&] {  // the receive is posted: the receiver reads the lane that holds it
    for (int lane = 1; lane <= 2; lane++) {
      pollfd q{wires.lane(lane), POLLIN, 0};
      if (::poll(&q, 1, 0) <= 0) continue;
      ChunkHeader h;
      ASSERT_TRUE(readAll(wires.lane(lane), &h, sizeof h));
      EXPECT_EQ(h.flags, kChunkEager);
      std::vector<uint8_t> sink(h.length);
      ASSERT_TRUE(readAll(wires.lane(lane), sink.data(), h.length));
    }
  });
  EXPECT_EQ(finish(r), Status::Ok);
  reader.join();
}

// Once its record arrives, the receiver has posted the eager message's receive and must read it.
TEST_F(SendSideStoppedReader, EagerMessageWhoseRecordArrivedMustBeRead) {
  ASSERT_GE(currentTuning().laneEagerBytes, size_t{1} << 20) << "helper-lane eager messages are off";
  firstRecordUsed();
  std::vector<uint8_t> data(1 << 20, 3);
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), data.size(), 1, nullptr, &r), Status::Ok);
  usleep(100000);
  bool done = false;
  ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
  ASSERT_FALSE(done);
  postCts(1, 1, {{1, 1 << 20}}, 0, 0);  // its receive (the first record with its tag after its horizon)
  Request* next = queuedSend(2);        // a send that makes the comm read records
  double ms = 0;
  EXPECT_EQ(failed(r, &ms), Status::RemoteError);
  EXPECT_LT(ms, 3000.0);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer, "the peer stopped reading lane"}));
  EXPECT_EQ(finish(next), Status::RemoteError);
}

TEST_F(SendSide, CloseWithAPieceStuckInAFullSocketDoesNotWait) {
  const size_t n = 64u << 20;  // far more than the socket buffers hold: helpers block until close
  std::vector<uint8_t> data(n, 1);
  Request* r = nullptr;
  ASSERT_EQ(comm->isend(data.data(), n, 1, nullptr, &r), Status::Ok);
  postCts(0, 0, {{1, static_cast<uint32_t>(n)}});
  for (int i = 0; i < 100; i++) {
    bool done = false;
    ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
    ASSERT_FALSE(done);
    usleep(1000);
  }
  auto t0 = Clock::now();
  comm.reset();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  printf("closeSend with pieces stuck in full sockets: %.2f ms\n", ms);
  EXPECT_LT(ms, 500.0) << "close waited for the peer";
}

}  // namespace
}  // namespace icn::tcp

namespace icn::tcp {
namespace {
using namespace testwire;

// Failover on two rails (lane 1 on the first, lane 2 on the second), a lane stall of 50 ms. The scripted receiver
// takes lane 2's piece into its socket but leaves it unread until the sender gives the lane up: to the sender the
// piece arrived with its acknowledgement lost, as when a link goes down right after carrying it.
class SendSideFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::setEnvAndReload("ICN_TCP_LANE_EAGER_BYTES", "0");
    testing::setEnvAndReload("ICN_TCP_LANE_STALL_MS", "50");
    testing::setEnvAndReload("ICN_PEER_TIMEOUT_MS", "1000");
    testing::setEnvAndReload("ICN_TCP_CHUNK_BYTES", "4096");
    testing::installLogCapture();
    testing::takeWarnings();
    wires.comm.railNames = {"eth0 -> 10.0.0.2", "eth1 -> 10.0.1.2"};
    wires.comm.laneRail = {0, 0, 1};
    comm = std::make_unique<TcpSendComm>(std::move(wires.comm), kPeer, NetCommInfo{});
  }
  void TearDown() override {
    comm.reset();
    for (const char* n : {"ICN_TCP_LANE_EAGER_BYTES", "ICN_TCP_LANE_STALL_MS", "ICN_PEER_TIMEOUT_MS",
                          "ICN_TCP_CHUNK_BYTES"})
      testing::setEnvAndReload(n, nullptr);
    setenv("ICN_TCP_LANE_EAGER_BYTES", "1048576", 1);  // as tcp_test_wire.h set it for the other tests
    testing::setEnvAndReload("ICN_TCP_LANE_EAGER_BYTES", "1048576");
  }
  // Sends 128 KiB (a piece on each lane): lane 1's is read, lane 2's left in its socket until the sender gives
  // the lane up (its lane-down header on lane 0), then read. The request, still pending.
  Request* sendWithLaneTwoGivenUp() {
    CtsHeader h;
    h.seq = 0;
    h.n = 1;
    CtsEntry e{1, static_cast<uint32_t>(data.size())};
    std::vector<uint8_t> rec(sizeof h + sizeof e);
    memcpy(rec.data(), &h, sizeof h);
    memcpy(rec.data() + sizeof h, &e, sizeof e);
    writeAll(wires.lane(0), rec.data(), rec.size());
    Request* r = nullptr;
    EXPECT_EQ(comm->isend(data.data(), data.size(), 1, nullptr, &r), Status::Ok);
    if (!r) return nullptr;
    std::vector<uint8_t> got(data.size());
    size_t fromLane1 = 0, peeked = 0;
    bool laneDown = false;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!laneDown && Clock::now() < deadline) {
      bool done = false;
      EXPECT_EQ(r->test(&done, nullptr), Status::Ok);
      EXPECT_FALSE(done) << "the send completed while its piece on lane 2 was unread";
      fromLane1 += drainPieces(wires.lane(1), &got);
      uint8_t probe[4096];
      const ssize_t n = ::recv(wires.lane(2), probe, sizeof probe, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) peeked = static_cast<size_t>(n);
      ChunkHeader d;
      if (::recv(wires.lane(0), &d, sizeof d, MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof d)) {
        EXPECT_TRUE(readAll(wires.lane(0), &d, sizeof d));
        laneDown = (d.flags & kChunkLaneDown) && d.slot == 2;
        EXPECT_TRUE(laneDown) << "flags " << d.flags << " slot " << int(d.slot);
      }
    }
    EXPECT_GT(fromLane1, 0u) << "no piece on lane 1";
    EXPECT_GT(peeked, 0u) << "no piece on lane 2";
    EXPECT_TRUE(laneDown) << "lane 2 was not given up";
    size_t fromLane2 = 0;
    while (fromLane1 + fromLane2 < data.size() && Clock::now() < deadline)
      fromLane2 += drainPieces(wires.lane(2), &got);
    EXPECT_EQ(got, data) << "the receiver's copy";
    return r;
  }
  // Reads whole pieces waiting on a helper lane into `into`; their payload bytes.
  static size_t drainPieces(int fd, std::vector<uint8_t>* into) {
    size_t bytes = 0;
    ChunkHeader h;
    while (::recv(fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof h)) {
      EXPECT_TRUE(readAll(fd, &h, sizeof h));
      EXPECT_LE(uint64_t{h.offset} + h.length, into->size());
      if (uint64_t{h.offset} + h.length > into->size()) break;
      EXPECT_TRUE(readAll(fd, into->data() + h.offset, h.length));
      bytes += h.length;
    }
    return bytes;
  }
  Wires wires{2};
  std::unique_ptr<TcpSendComm> comm;
  std::vector<uint8_t> data = pattern(128 << 10);
};

// The receiver, whole, says so: the send completes with nothing resent (the lane-closed record it would send
// may never come: its next receive can wait on this very send).
TEST_F(SendSideFailover, ReceiveDoneCompletesASendWhosePieceWasOnAGivenUpLane) {
  Request* r = sendWithLaneTwoGivenUp();
  ASSERT_NE(r, nullptr);
  DoneRecord d;
  d.seq = 0;
  writeAll(wires.lane(0), &d, sizeof d);
  EXPECT_EQ(finish(r), Status::Ok);
  uint8_t b;
  EXPECT_EQ(::recv(wires.lane(1), &b, 1, MSG_DONTWAIT), -1) << "a piece was resent";
  EXPECT_TRUE(testing::takeWarnings().size() <= 1) << "only the lane's own WARN";
}

// Neither the lane closed nor the receive reported whole within ICN_PEER_TIMEOUT_MS: an error, never a hang.
TEST_F(SendSideFailover, GivenUpLaneNeverAnsweredFailsWithinThePeerTimeout) {
  Request* r = sendWithLaneTwoGivenUp();
  ASSERT_NE(r, nullptr);
  const auto t0 = Clock::now();
  EXPECT_EQ(finish(r), Status::RemoteError);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(s, 2.5);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(),
                              {kPeer, "lane 2 given up", "neither closed it nor reported the receive whole"}));
}

// A receive-done record for a receive whose clear-to-send never came is a lie: the connection fails.
TEST_F(SendSideFailover, ReceiveDoneForAnUnknownReceiveFails) {
  DoneRecord d;
  d.seq = 7;
  writeAll(wires.lane(0), &d, sizeof d);
  Request* r = nullptr;
  Status st = comm->isend(data.data(), 16, 1, nullptr, &r);  // reading the records may already fail it
  if (st == Status::Ok) st = r ? finish(r) : Status::InternalError;
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer, "receive-done record for receive 7"}));
}

}  // namespace
}  // namespace icn::tcp
