// The TCP receive comm against a scripted sender: the test holds the far ends of socketpairs standing in for the
// control socket and the lanes, and writes what a correct, buggy or hostile sender would. Every bad record must
// fail the connection with a WARN naming the peer, and no byte may land outside the posted buffer.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <regex>
#include <future>
#include <thread>
#include <vector>

#include "tcp_test_wire.h"

namespace icn::tcp {
namespace {
using namespace testwire;

class RecvSide : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::installLogCapture();
    testing::takeWarnings();
    wires.comm.eagerBytes = kEager;
    comm = std::make_unique<TcpRecvComm>(std::move(wires.comm), kPeer, NetCommInfo{});
    buf.assign(kPosted + kGuard, 0xEE);
  }
  // Posts one receive of kPosted bytes with `tag` and reads the clear-to-send record it sends.
  Request* post(int tag, CtsHeader* cts) {
    void* d = buf.data();
    size_t sz = kPosted;
    Request* r = nullptr;
    EXPECT_EQ(comm->irecv(1, &d, &sz, &tag, nullptr, &r), Status::Ok);
    EXPECT_TRUE(readAll(wires.lane(0), cts, sizeof *cts));
    CtsEntry e;
    EXPECT_TRUE(readAll(wires.lane(0), &e, sizeof e));
    EXPECT_EQ(cts->n, 1);
    EXPECT_EQ(e.tag, tag);
    EXPECT_EQ(e.size, kPosted);
    return r;
  }
  bool guardIntact() const {
    for (size_t i = kPosted; i < buf.size(); i++)
      if (buf[i] != 0xEE) return false;
    return true;
  }
  void expectWarn(const char* what) {
    auto w = testing::takeWarnings();
    EXPECT_TRUE(testing::warned(w, {kPeer, what})) << "no WARN naming the peer and saying: " << what;
  }

  static constexpr uint32_t kPosted = 1000;
  static constexpr size_t kGuard = 4096;
  static constexpr uint32_t kEager = 2048;
  std::vector<uint8_t> buf;  // before comm: a lane may still be writing into it until comm is closed
  Wires wires{1};
  std::unique_ptr<TcpRecvComm> comm;
};

TEST_F(RecvSide, PiecesOnAnyLaneLandExactly) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  sendChunk(wires.lane(1), chunk(cts, 0, 7, 900, 0, 500), data);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 900, 500, 400), data);
  int size = -1;
  ASSERT_EQ(finish(r, &size), Status::Ok);
  EXPECT_EQ(size, 900);
  EXPECT_EQ(memcmp(buf.data(), data.data(), 900), 0);
  EXPECT_EQ(buf[900], 0xEE) << "bytes past the message";
  EXPECT_TRUE(guardIntact());
}

TEST_F(RecvSide, MessageLargerThanPostedFailsAndWritesNothing) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted + 100);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, kPosted + 100, 0, kPosted + 100), data);
  EXPECT_EQ(finish(r), Status::InvalidUsage);
  expectWarn("for a receive buffer of 1000 bytes");
  EXPECT_EQ(buf[0], 0xEE);
  EXPECT_TRUE(guardIntact());
}

TEST_F(RecvSide, PieceOutsideItsMessageFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  sendChunk(wires.lane(1), chunk(cts, 0, 7, 100, 90, 20), data);
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("outside its 100-byte message");
  EXPECT_TRUE(guardIntact());
}

TEST_F(RecvSide, MoreBytesThanTheMessageFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  sendChunk(wires.lane(1), chunk(cts, 0, 7, 100, 0, 60), data);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 100, 0, 60), data);
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("piece [0, +60) of the 100-byte message (tag 7) arrived twice");
  EXPECT_TRUE(guardIntact());
}

// Every byte of a message is written exactly once: pieces whose lengths add up to the message but overlap leave
// some of it unwritten, so they fail the connection rather than complete the receive.
TEST_F(RecvSide, OverlappingPiecesFail) {
  const size_t heap = heapInUse();
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 64, 0, 40), data);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 64, 16, 24), data);
  EXPECT_EQ(finish(r), Status::RemoteError) << "completed with bytes 40-63 never written";
  expectWarn("piece [16, +24) of the 64-byte message (tag 7) overlaps bytes [0, 40) already received");
  EXPECT_EQ(buf[40], 0xEE);
  EXPECT_TRUE(guardIntact());
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
}

TEST_F(RecvSide, DuplicatePieceFails) {
  const size_t heap = heapInUse();
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 64, 0, 32), data);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 64, 0, 32), data);
  EXPECT_EQ(finish(r), Status::RemoteError) << "completed with bytes 32-63 never written";
  expectWarn("piece [0, +32) of the 64-byte message (tag 7) arrived twice");
  EXPECT_EQ(buf[32], 0xEE);
  EXPECT_TRUE(guardIntact());
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
}

// A sender splits a message into at most one piece per helper lane (or sends it whole on lane 0).
TEST_F(RecvSide, MorePiecesThanLanesFail) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  constexpr uint32_t n = kMaxLanes + 2;  // one more than the most a sender uses
  std::vector<uint8_t> pieces;
  for (uint32_t i = 0; i < n; i++) {
    ChunkHeader h = chunk(cts, 0, 7, n, i, 1);
    pieces.insert(pieces.end(), reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof h);
    pieces.push_back(data[i]);
  }
  writeAll(wires.lane(0), pieces.data(), pieces.size());
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn(("more than " + std::to_string(kMaxLanes + 1) + " pieces of one message").c_str());
  EXPECT_TRUE(guardIntact());
}

TEST_F(RecvSide, PiecesDisagreeingOnSizeFail) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  auto data = pattern(kPosted);
  sendChunk(wires.lane(1), chunk(cts, 0, 7, 100, 0, 50), data);
  sendChunk(wires.lane(0), chunk(cts, 0, 7, 200, 50, 50), data);
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("disagree on its size");
}

TEST_F(RecvSide, WrongTagFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  sendChunk(wires.lane(0), chunk(cts, 0, 8, 10, 0, 10), pattern(10));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("posted with another tag");
  EXPECT_EQ(buf[0], 0xEE);
}

TEST_F(RecvSide, DataForAReceiveNotPostedFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  CtsHeader later = cts;
  later.seq += 1;  // the next receive, not posted yet
  sendChunk(wires.lane(1), chunk(later, 0, 7, 10, 0, 10), pattern(10));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("which is not posted");
  EXPECT_EQ(buf[0], 0xEE);
}

TEST_F(RecvSide, GarbageOnALaneFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  std::vector<uint8_t> junk(64);
  for (size_t i = 0; i < junk.size(); i++) junk[i] = static_cast<uint8_t>(i * 37 + 11);
  writeAll(wires.lane(1), junk.data(), junk.size());
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("garbage where a message header was expected");
  EXPECT_TRUE(guardIntact());
}

TEST_F(RecvSide, PeerClosingFailsPendingReceive) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  wires.peer.clear();  // the peer's process exits: every socket closes
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("peer closed the connection");
}

TEST_F(RecvSide, CloseWithReceivesPendingDoesNotWaitForThePeer) {
  CtsHeader cts;
  post(7, &cts);
  auto data = pattern(kPosted);
  ChunkHeader h = chunk(cts, 0, 7, 900, 0, 500);  // a piece that stops a fifth of the way in
  writeAll(wires.lane(1), &h, sizeof h);
  writeAll(wires.lane(1), data.data(), 100);
  usleep(20000);  // the helper is inside the piece now
  auto t0 = Clock::now();
  comm.reset();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  printf("closeRecv with a pending receive and an idle peer: %.2f ms\n", ms);
  EXPECT_LT(ms, 500.0) << "close waited for the peer";
}

TEST_F(RecvSide, EagerMessagesBeforeTheirReceivesAreStagedInOrder) {
  auto a = pattern(300), b = pattern(500);
  for (auto& x : b) x ^= 0x5a;
  sendChunk(wires.lane(0), eager(0, 7, 300, 0), a);
  sendChunk(wires.lane(0), eager(0, 7, 500, 1), b);
  usleep(20000);
  CtsHeader cts;
  Request* r = post(7, &cts);  // the first eager message of tag 7 belongs to the first receive of tag 7
  int size = -1;
  ASSERT_EQ(finish(r, &size), Status::Ok);
  EXPECT_EQ(size, 300);
  EXPECT_EQ(memcmp(buf.data(), a.data(), 300), 0);
  EXPECT_TRUE(guardIntact());
  Request* r2 = post(7, &cts);
  EXPECT_EQ(cts.credits, 2) << "both eager messages are consumed by now: their credits come back with this record";
  ASSERT_EQ(finish(r2, &size), Status::Ok);
  EXPECT_EQ(size, 500);
  EXPECT_EQ(memcmp(buf.data(), b.data(), 500), 0);
}

TEST_F(RecvSide, EagerMessageSkipsReceivesBeforeItsHorizon) {
  CtsHeader first, second;
  Request* r1 = post(7, &first);
  // Record 0 was read and taken by a send that goes through the helper lanes; the eager message after it says
  // so (horizon 1) and must wait for receive 1 even though receive 0 is still empty.
  auto data = pattern(kPosted);
  sendChunk(wires.lane(0), eager(1, 7, 10), data);
  std::vector<uint8_t> other(kPosted + kGuard, 0xEE);
  void* d = other.data();
  size_t sz = kPosted;
  int tag = 7;
  Request* r2 = nullptr;
  usleep(20000);
  ASSERT_EQ(comm->irecv(1, &d, &sz, &tag, nullptr, &r2), Status::Ok);
  int size = -1;
  ASSERT_EQ(finish(r2, &size), Status::Ok);
  EXPECT_EQ(size, 10);
  EXPECT_EQ(memcmp(other.data(), data.data(), 10), 0);
  sendChunk(wires.lane(1), chunk(first, 0, 7, 40, 0, 40), data);
  ASSERT_EQ(finish(r1, &size), Status::Ok);
  EXPECT_EQ(size, 40);
  comm.reset();  // before `other` goes
}

TEST_F(RecvSide, MoreEagerMessagesThanCreditsFail) {
  CtsHeader cts;
  Request* r = post(9, &cts);  // a receive none of them belongs to
  for (uint32_t i = 0; i <= kEagerCredits; i++) sendChunk(wires.lane(0), eager(1, 7, 8, i), pattern(8));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn(("more eager messages than the " + std::to_string(kEagerCredits) + " credits").c_str());
}

TEST_F(RecvSide, RepeatedEagerNumberFails) {
  CtsHeader cts;
  Request* r = post(9, &cts);  // a receive neither belongs to: both wait
  sendChunk(wires.lane(0), eager(1, 7, 8, 0), pattern(8));
  sendChunk(wires.lane(0), eager(1, 7, 8, 0), pattern(8));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("eager message number 0 repeated");
}

TEST_F(RecvSide, EagerMessageBeyondTheLimitFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  sendChunk(wires.lane(0), eager(0, 7, kEager + 1), pattern(kEager + 1));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("eager message of 2049 bytes (limit 2048)");
}

TEST_F(RecvSide, EagerMessageOnAHelperLaneWaitsInItsSocketUntilItsReceiveIsPosted) {
  auto data = pattern(kPosted);
  sendChunk(wires.lane(1), eager(0, 7, 900, 0), data);  // larger than the lane-0 limit would allow: not staged
  usleep(100000);
  EXPECT_EQ(buf[0], 0xEE) << "landed before its receive was posted";
  CtsHeader cts;
  Request* r = post(7, &cts);
  int size = -1;
  ASSERT_EQ(finish(r, &size), Status::Ok);
  EXPECT_EQ(size, 900);
  EXPECT_EQ(memcmp(buf.data(), data.data(), 900), 0);
  EXPECT_TRUE(guardIntact());
  Request* r2 = post(7, &cts);
  EXPECT_EQ(cts.earlyCredits, 1) << "its credit (of the large kind) comes back with the next record";
  EXPECT_EQ(cts.credits, 0);
  sendChunk(wires.lane(1), chunk(cts, 0, 7, 10, 0, 10), data);  // the lane reads on after it
  ASSERT_EQ(finish(r2, &size), Status::Ok);
  EXPECT_EQ(size, 10);
  // The close line tells how long the lane held the message: the 100 ms before its receive was posted, less the
  // time its helper thread took to see it arrive (on a loaded machine, up to tens of ms).
  const auto held = waitsIn(closeLine(comm), std::regex(R"(2 messages received; the helper lanes held a message )"
                                                         R"(that arrived before its receive (\d+) times, ([\d.]+) ms in all)"));
  EXPECT_TRUE(held) << "no receive close line with the held time";
  if (held) {
    EXPECT_GE(held->count, 1);
    EXPECT_GE(held->ms, 50.0);
  }
}

TEST_F(RecvSide, EagerMessagesAcrossLanesArePlacedInNumberOrder) {
  // Number 1 (lane 0) arrives before number 0 (a helper lane): number 0 still takes the first receive.
  auto a = pattern(kPosted), b = pattern(300);
  for (auto& x : b) x ^= 0x5a;
  sendChunk(wires.lane(0), eager(0, 7, 300, 1), b);
  usleep(20000);
  std::vector<uint8_t> other(kPosted + kGuard, 0xEE);
  CtsHeader cts;
  Request* r1 = post(7, &cts);
  void* d = other.data();
  size_t sz = kPosted;
  int tag = 7;
  Request* r2 = nullptr;
  ASSERT_EQ(comm->irecv(1, &d, &sz, &tag, nullptr, &r2), Status::Ok);
  usleep(20000);
  bool done = false;
  ASSERT_EQ(r2->test(&done, nullptr), Status::Ok);
  EXPECT_FALSE(done) << "number 1 was placed before number 0 was seen";
  sendChunk(wires.lane(1), eager(0, 7, 900, 0), a);
  int size = -1;
  ASSERT_EQ(finish(r1, &size), Status::Ok);
  EXPECT_EQ(size, 900);
  EXPECT_EQ(memcmp(buf.data(), a.data(), 900), 0);
  ASSERT_EQ(finish(r2, &size), Status::Ok);
  EXPECT_EQ(size, 300);
  EXPECT_EQ(memcmp(other.data(), b.data(), 300), 0);
  comm.reset();  // before `other` goes
}

TEST_F(RecvSide, EagerMessageFindsItsReceiveAfterLaterOnesCompletedOutOfOrder) {
  CtsHeader first, cts;
  Request* r0 = post(7, &first);  // the eager message's receive: it stays open while later ones come and go
  auto data = pattern(kPosted);
  for (uint32_t k = 0; k < 2 * kMaxRequests; k++) {
    Request* r = post(7, &cts);
    sendChunk(wires.lane(0), chunk(cts, 0, 7, 10, 0, 10), data);
    ASSERT_EQ(finish(r), Status::Ok);
  }
  auto e = pattern(20);
  for (auto& x : e) x ^= 0x5a;
  sendChunk(wires.lane(1), eager(0, 7, 20, 0), e);  // horizon 0: receive 0 is the first free one
  int size = -1;
  ASSERT_EQ(finish(r0, &size), Status::Ok);
  EXPECT_EQ(size, 20);
  EXPECT_EQ(memcmp(buf.data(), e.data(), 20), 0);
}

TEST_F(RecvSide, HeldEagerMessageLargerThanItsReceiveFailsAndWritesNothing) {
  sendChunk(wires.lane(1), eager(0, 7, kPosted + 1, 0), pattern(kPosted + 1));
  usleep(20000);
  void* d = buf.data();
  size_t sz = kPosted;
  int tag = 7;
  Request* r = nullptr;
  Status st = comm->irecv(1, &d, &sz, &tag, nullptr, &r);  // the receive that the held message names
  if (st == Status::Ok && r) st = finish(r);
  EXPECT_EQ(st, Status::InvalidUsage);
  expectWarn("for a receive buffer of 1000 bytes");
  EXPECT_EQ(buf[0], 0xEE);
  EXPECT_TRUE(guardIntact());
}

TEST_F(RecvSide, CloseWithAHeldEagerMessageDoesNotWait) {
  sendChunk(wires.lane(1), eager(0, 7, 900, 0), pattern(900));
  usleep(20000);  // the helper holds it now
  auto t0 = Clock::now();
  comm.reset();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_LT(ms, 500.0) << "close waited for the held lane";
}

TEST_F(RecvSide, EagerMessageLargerThanItsReceiveFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  sendChunk(wires.lane(0), eager(0, 7, kPosted + 1), pattern(kPosted + 1));
  EXPECT_EQ(finish(r), Status::InvalidUsage);
  expectWarn("for a receive buffer of 1000 bytes");
  EXPECT_TRUE(guardIntact());
}

// A sender whose receiver's lane 0 holds only a few records: the rest wait in the comm.
class RecvSideSmallLane0 : public RecvSide {
 protected:
  void SetUp() override {
    shrinkSendBuffer(wires.comm.lanes[0]);
    RecvSide::SetUp();
  }
  // Posts a receive of kPosted bytes with `tag` without reading its record.
  Request* postUnread(int tag) {
    void* d = buf.data();
    size_t sz = kPosted;
    Request* r = nullptr;
    Status st = comm->irecv(1, &d, &sz, &tag, nullptr, &r);
    return st == Status::Ok ? r : nullptr;
  }
  // Bytes of records written to lane 0 that the peer has not read.
  int unreadRecordBytes() {
    int n = 0;
    EXPECT_EQ(ioctl(wires.lane(0), FIONREAD, &n), 0);
    return n;
  }
};

// A sender that reads the first record and no other, and floods the receiver with eager messages on a helper
// lane while the application posts a receive for each (as NCCL does). Eager credits come back only in records, so
// it has only the ones it started with: the message after them fails the connection. Before that, the records it
// leaves unread (the socket holds a few, the comm the rest) stay below the comm's bound.
TEST_F(RecvSideSmallLane0, EagerFloodWithoutReadingRecordsFailsAtTheCreditsItStartedWith) {
  const size_t heap = heapInUse();
  CtsHeader cts;
  Request* r = post(7, &cts);  // record 0: the only one it reads
  const auto payload = pattern(8);
  const uint32_t startCredits = kEagerCredits + kEarlyCredits;
  uint32_t completed = 0;
  Status st = Status::Ok;
  for (uint32_t n = 0; n < 4 * kEagerWindow && r; n++) {
    sendChunk(wires.lane(1), eager(0, 7, 8, n), payload);  // horizon 0: it read no record
    st = finish(r);
    if (st != Status::Ok) break;
    completed++;
    r = postUnread(7);
  }
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_EQ(completed, startCredits) << "the receives its first credits completed, and no more";
  expectWarn(("eager message " + std::to_string(startCredits) +
              " spends a credit handed back in clear-to-send record 1, which it had not read (horizon 0)")
                 .c_str());
  EXPECT_LT(unreadRecordBytes(), static_cast<int>(completed * (sizeof(CtsHeader) + sizeof(CtsEntry))))
      << "the socket held every record: the comm's own backlog was not exercised";
  EXPECT_TRUE(guardIntact());
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
}

// The same flood from a sender that names as its horizon every record written so far (it can see them arrive
// without reading them): credits handed back in records still queued in the comm cannot have been read.
TEST_F(RecvSideSmallLane0, EagerFloodClaimingEveryRecordWrittenFailsBeforeTheBacklogBound) {
  const size_t heap = heapInUse();
  CtsHeader cts;
  Request* r = post(9, &cts);  // record 0, read; a receive none of the flood belongs to
  uint32_t seq = 0;
  r = postUnread(7);  // record 1
  seq++;
  const auto payload = pattern(8);
  uint32_t completed = 0;
  Status st = Status::Ok;
  for (uint32_t n = 0; n < 4 * kEagerWindow && r; n++) {
    const uint32_t written = 1 + static_cast<uint32_t>(unreadRecordBytes()) / (sizeof(CtsHeader) + sizeof(CtsEntry));
    // Its receive: the newest record if written (then the horizon is the one before), else the next one.
    const uint32_t horizon = std::min(written, seq);
    sendChunk(wires.lane(1), eager(horizon, 7, 8, n), payload);
    st = finish(r);
    if (st != Status::Ok) break;
    completed++;
    r = postUnread(7);
    seq++;
  }
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_LE(completed, kEagerCredits + kEarlyCredits + 8u);
  auto w = testing::takeWarnings();
  EXPECT_TRUE(testing::warned(w, {kPeer, "spends a credit"}) || testing::warned(w, {kPeer, "which was never sent"}))
      << "no WARN naming the peer and the credit it had not read";
  EXPECT_TRUE(guardIntact());
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
}

// Data for a posted receive whose record is still queued in the comm: no honest sender can have read it.
TEST_F(RecvSideSmallLane0, DataForAReceiveWhoseRecordWasNotSentFails) {
  std::vector<Request*> posted;
  for (int i = 0; i < kMaxRequests; i++) posted.push_back(postUnread(7));
  ASSERT_LT(unreadRecordBytes(), static_cast<int>(kMaxRequests * (sizeof(CtsHeader) + sizeof(CtsEntry))))
      << "the socket took every record";
  CtsHeader last;
  last.seq = kMaxRequests - 1;
  last.slot = kMaxRequests - 1;  // the pool hands out slots 0, 1, ... in turn
  sendChunk(wires.lane(1), chunk(last, 0, 7, 10, 0, 10), pattern(10));
  EXPECT_EQ(finish(posted.back()), Status::RemoteError);
  expectWarn("data for receive 31, whose clear-to-send record was never sent");
}

// A sender that stops reading lane 0 while receives are posted (their records wait in the comm) is failed once
// ICN_PEER_TIMEOUT_MS passes without a record going out.
class RecvSideStoppedReader : public RecvSideSmallLane0 {
 protected:
  void SetUp() override {
    testing::setEnvAndReload("ICN_PEER_TIMEOUT_MS", "300");
    RecvSideSmallLane0::SetUp();
  }
  void TearDown() override { testing::setEnvAndReload("ICN_PEER_TIMEOUT_MS", nullptr); }
};

TEST_F(RecvSideStoppedReader, SenderThatStopsReadingRecordsFails) {
  const size_t heap = heapInUse();
  std::vector<Request*> posted;
  for (int i = 0; i < kMaxRequests; i++) posted.push_back(postUnread(7));
  ASSERT_NE(posted.front(), nullptr);
  const auto t0 = Clock::now();
  EXPECT_EQ(finish(posted.front()), Status::RemoteError);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_GE(ms, 250.0) << "failed before ICN_PEER_TIMEOUT_MS";
  EXPECT_LT(ms, 3000.0);
  expectWarn("the peer stopped reading lane 0: nothing of");
  for (Request* r : posted) EXPECT_EQ(finish(r), Status::RemoteError);
  EXPECT_LT(heapInUse(), heap + kHeapSlack);
}

TEST_F(RecvSide, EagerMessageNamingAnUnsentRecordFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  sendChunk(wires.lane(0), eager(5, 7, 8), pattern(8));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("which was never sent");
}

// A lane-down, a resent piece or a lane offer is a failover message: on a connection over one rail it is a
// protocol error.
TEST_F(RecvSide, FailoverMessagesOnOneRailFail) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  ChunkHeader down;
  down.flags = kChunkLaneDown;
  down.slot = 1;
  sendChunk(wires.lane(0), down, {});
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("which is not a live helper lane");
}

TEST_F(RecvSide, ResentPieceWithoutALaneDownFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  ChunkHeader h = chunk(cts, 0, 7, 100, 0, 100);
  h.flags = kChunkResend;
  sendChunk(wires.lane(1), h, pattern(100));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("a resent piece before any lane was given up");
  EXPECT_TRUE(guardIntact());
}

// Two helper lanes on two rails: lane 2 dies with half a piece read; the sender gives it up, the receiver closes
// it (a lane-closed record after the clear-to-send), and the pieces come again on lane 1: the one cut short is
// placed, the one that had arrived whole is read and dropped; every byte lands once.
class RecvSideTwoRails : public RecvSide {
 protected:
  void SetUp() override {
    testing::installLogCapture();
    testing::takeWarnings();
    wires2.comm.eagerBytes = kEager;
    wires2.comm.railNames = {"eth0 <- a", "eth1 <- b"};
    wires2.comm.laneRail = {0, 0, 1};
    comm = std::make_unique<TcpRecvComm>(std::move(wires2.comm), kPeer, NetCommInfo{});
    buf.assign(kPosted + kGuard, 0xEE);
  }
  // Posts a receive of kPosted bytes with tag 7 and reads its clear-to-send record: the record's header.
  CtsHeader postTagSeven(Request** r) {
    void* d = buf.data();
    size_t sz = kPosted;
    int tag = 7;
    CtsHeader cts;
    CtsEntry e;
    EXPECT_EQ(comm->irecv(1, &d, &sz, &tag, nullptr, r), Status::Ok);
    EXPECT_TRUE(readAll(wires2.lane(0), &cts, sizeof cts));
    EXPECT_TRUE(readAll(wires2.lane(0), &e, sizeof e));
    return cts;
  }
  Wires wires2{2};
};

TEST_F(RecvSideTwoRails, PiecesOfAGivenUpLaneLandOnce) {
  Request* r = nullptr;
  const CtsHeader cts = postTagSeven(&r);
  ASSERT_NE(r, nullptr);
  auto data = pattern(kPosted);
  sendChunk(wires2.lane(1), chunk(cts, 0, 7, 900, 0, 400), data);  // whole
  ChunkHeader cut = chunk(cts, 0, 7, 900, 400, 500);
  writeAll(wires2.lane(2), &cut, sizeof cut);
  writeAll(wires2.lane(2), data.data() + 400, 200);  // 200 of its 500 bytes, then the lane is given up
  bool done = false;
  for (int i = 0; i < 50 && !done; i++) {  // lets the lanes read what they hold
    ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(done);
  ChunkHeader down;
  down.flags = kChunkLaneDown;
  down.slot = 2;
  sendChunk(wires2.lane(0), down, {});
  LaneRecord closed;
  for (int i = 0; i < 2000; i++) {  // the lane-closed record comes once lane 2's reader has stopped
    ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
    pollfd p{wires2.lane(0), POLLIN, 0};
    if (::poll(&p, 1, 5) == 1) break;
  }
  ASSERT_TRUE(readAll(wires2.lane(0), &closed, sizeof closed));
  EXPECT_EQ(closed.magic, kLaneMagic);
  EXPECT_EQ(closed.lane, 2u);
  for (auto [off, len] : {std::pair<uint32_t, uint32_t>{400, 500}, {0, 400}}) {  // the second is a duplicate
    ChunkHeader again = chunk(cts, 0, 7, 900, off, len);
    again.flags = kChunkResend;
    sendChunk(wires2.lane(1), again, data);
  }
  int size = -1;
  ASSERT_EQ(finish(r, &size), Status::Ok);
  EXPECT_EQ(size, 900);
  EXPECT_EQ(memcmp(buf.data(), data.data(), 900), 0);
  EXPECT_TRUE(guardIntact());
  EXPECT_TRUE(testing::takeWarnings().empty());
  DoneRecord whole;
  ASSERT_TRUE(readAll(wires2.lane(0), &whole, sizeof whole));
  EXPECT_EQ(whole.magic, kDoneMagic);
  EXPECT_EQ(whole.seq, cts.seq);
}

// A lane-down record (its landing: no payload, dropped) followed on lane 0 by an eager message whose receive is not
// posted yet: the message is staged whole and placed when the receive comes, nothing of the record's landing
// carrying over to it.
TEST_F(RecvSideTwoRails, EagerMessageStagedAfterALaneDownArrivesWhole) {
  Request* r = nullptr;
  postTagSeven(&r);  // a receive that stays open: its tests read lane 0
  ASSERT_NE(r, nullptr);
  ChunkHeader down;
  down.flags = kChunkLaneDown;
  down.slot = 2;
  sendChunk(wires2.lane(0), down, {});
  auto data = pattern(50);
  for (auto& x : data) x ^= 0x3c;
  sendChunk(wires2.lane(0), eager(1, 9, 50), data);  // horizon 1: the one record sent so far was read
  bool done = false;
  for (int i = 0; i < 50; i++) {  // lane 0 read: the lane-down, then the eager message into its stage
    ASSERT_EQ(r->test(&done, nullptr), Status::Ok);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_FALSE(done);
  std::vector<uint8_t> other(kPosted + kGuard, 0xEE);
  void* d = other.data();
  size_t sz = kPosted;
  int tag = 9;
  Request* r9 = nullptr;
  ASSERT_EQ(comm->irecv(1, &d, &sz, &tag, nullptr, &r9), Status::Ok);
  int size = -1;
  ASSERT_EQ(finish(r9, &size), Status::Ok);
  EXPECT_EQ(size, 50);
  EXPECT_EQ(memcmp(other.data(), data.data(), 50), 0) << "the staged eager message's bytes were dropped";
  EXPECT_EQ(other[50], 0xEE);
  EXPECT_TRUE(testing::takeWarnings().empty());
}

// An empty eager message held on a helper lane that the sender then gives up: the lane stops holding it. When an
// eager message on another lane brings its turn, its receive is whole without the lane, and testing that receive
// returns (before, the receive waited forever for the gone lane to land the message).
TEST_F(RecvSideTwoRails, EmptyEagerMessageOfAGivenUpLaneDoesNotHangItsReceive) {
  Request* r = nullptr;
  postTagSeven(&r);
  ASSERT_NE(r, nullptr);
  sendChunk(wires2.lane(2), eager(0, 7, 0, 1), {});  // number 1 before number 0: lane 2 holds it
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ChunkHeader down;
  down.flags = kChunkLaneDown;
  down.slot = 2;
  sendChunk(wires2.lane(0), down, {});
  bool done = false;
  for (int i = 0; i < 50; i++) {  // lane 0 read: lane 2 given up, its reader stops (failing the connection)
    (void)r->test(&done, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_FALSE(done);
  expectWarn("given up holding a message sent before its receive");
  auto data = pattern(10);
  sendChunk(wires2.lane(1), eager(0, 5, 10, 0), data);  // number 0 on lane 1: number 1's turn comes
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto tested = std::async(std::launch::async, [&] {
    Status st = Status::Ok;
    for (int i = 0; i < 100 && st == Status::Ok && !done; i++) st = r->test(&done, nullptr);
    return st;
  });
  if (tested.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "test() of the receive did not return within 5 s";
    fflush(stdout);
    _exit(1);  // the test thread is stuck inside the comm: nothing can be torn down
  }
  const Status st = tested.get();
  EXPECT_TRUE(done || st != Status::Ok) << "the receive neither completed nor failed";
}

// A receive that took pieces from helper lanes tells the sender it is whole (a sender that gave up one of those
// lanes waits for nothing more); one that came whole on lane 0 does not.
TEST_F(RecvSideTwoRails, ReceiveWholeFromHelperLanesIsReportedDone) {
  auto data = pattern(kPosted);
  for (int round = 0; round < 2; round++) {
    Request* r = nullptr;
    const CtsHeader cts = postTagSeven(&r);
    ASSERT_NE(r, nullptr);
    if (round == 0) {
      sendChunk(wires2.lane(1), chunk(cts, 0, 7, 900, 0, 400), data);
      sendChunk(wires2.lane(2), chunk(cts, 0, 7, 900, 400, 500), data);
    } else {
      sendChunk(wires2.lane(0), chunk(cts, 0, 7, 900, 0, 900), data);
    }
    ASSERT_EQ(finish(r), Status::Ok);
    pollfd p{wires2.lane(0), POLLIN, 0};
    const bool more = ::poll(&p, 1, 100) == 1;
    if (round == 1) {
      EXPECT_FALSE(more) << "a receive whole on lane 0 was reported";
      continue;
    }
    ASSERT_TRUE(more) << "no receive-done record";
    DoneRecord whole;
    ASSERT_TRUE(readAll(wires2.lane(0), &whole, sizeof whole));
    EXPECT_EQ(whole.magic, kDoneMagic);
    EXPECT_EQ(whole.seq, cts.seq);
    EXPECT_EQ(whole.reserved, 0u);
  }
  EXPECT_TRUE(testing::takeWarnings().empty());
}

}  // namespace
}  // namespace icn::tcp
