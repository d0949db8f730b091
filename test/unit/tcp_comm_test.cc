// The TCP transport's comms against a scripted peer: the test holds the far ends of socketpairs standing in for
// the control socket and the lanes, and writes what a correct, buggy or hostile peer would. Every bad record
// must fail the connection with a WARN naming the peer, and no byte may land outside the posted buffer.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <algorithm>
#include <regex>
#include <thread>
#include <vector>

#include "../reliability/log_capture.h"
#include "core/socket.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kPeer = "hostile-peer:4242";

// The comm's sockets and the peer's ends of them: control, lane 0, then helper lanes.
struct Wires {
  Sockets comm;
  std::vector<Fd> peer;
  explicit Wires(int helperLanes) {
    for (int i = 0; i < 2 + helperLanes; i++) {
      int sv[2];
      EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
      Fd mine(sv[0]);
      if (i == 0)
        comm.control = std::move(mine);
      else
        comm.lanes.push_back(std::move(mine));
      peer.emplace_back(sv[1]);
    }
  }
  int lane(int i) const { return peer[1 + i].get(); }
};

void writeAll(int fd, const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    ASSERT_GT(w, 0) << strerror(errno);
    b += w;
    n -= static_cast<size_t>(w);
  }
}

bool readAll(int fd, void* p, size_t n) {
  uint8_t* b = static_cast<uint8_t*>(p);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (n > 0 && Clock::now() < deadline) {
    pollfd q{fd, POLLIN, 100};
    if (::poll(&q, 1, 100) <= 0) continue;
    ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return n == 0;
}

void sendChunk(int fd, ChunkHeader h, const std::vector<uint8_t>& payload) {
  writeAll(fd, &h, sizeof h);
  if (h.length) writeAll(fd, payload.data() + h.offset, h.length);
}

ChunkHeader eager(uint32_t horizon, int tag, uint32_t size, uint32_t number = 0) {
  ChunkHeader h;
  h.flags = kChunkEager;
  h.seq = horizon;
  h.tag = tag;
  h.total = h.length = size;
  h.eager = number;
  return h;
}

ChunkHeader chunk(const CtsHeader& cts, int index, int tag, uint32_t total, uint32_t offset, uint32_t length) {
  ChunkHeader h;
  h.seq = cts.seq;
  h.slot = cts.slot;
  h.index = static_cast<uint8_t>(index);
  h.tag = tag;
  h.total = total;
  h.offset = offset;
  h.length = length;
  return h;
}

// Tests a request until it finishes; the status it ended with (Ok only when done).
Status finish(Request* r, int* sizes = nullptr) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    bool done = false;
    Status st = r->test(&done, sizes);
    if (st != Status::Ok || done) return st;
  }
  ADD_FAILURE() << "request neither finished nor failed within 10 s";
  return Status::InternalError;
}

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

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(i * 7 + 1);
  return v;
}

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
  expectWarn("more bytes than the 100-byte message");
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
  usleep(30000);
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
  testing::takeInfos();
  comm.reset();
  // The close line tells how long the lane held the message: at least the 30 ms before its receive was posted.
  const std::regex held(R"(2 messages received; the helper lanes held a message that arrived before its receive (\d+) times, ([\d.]+) ms in all)");
  std::smatch m;
  bool found = false;
  for (auto& line : testing::takeInfos())
    if (std::regex_search(line, m, held)) {
      found = true;
      EXPECT_GE(std::stoi(m[1]), 1);
      EXPECT_GE(std::stod(m[2]), 25.0);
    }
  EXPECT_TRUE(found) << "no receive close line with the held time";
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

TEST_F(RecvSide, EagerMessageNamingAnUnsentRecordFails) {
  CtsHeader cts;
  Request* r = post(7, &cts);
  sendChunk(wires.lane(0), eager(5, 7, 8), pattern(8));
  EXPECT_EQ(finish(r), Status::RemoteError);
  expectWarn("which was never sent");
}

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
  testing::takeInfos();
  comm.reset();
  std::string closeLine;
  for (auto& line : testing::takeInfos())
    if (line.find("closed:") != std::string::npos) closeLine = line;
  EXPECT_NE(closeLine.find(std::to_string(kEarlyCredits) + " early"), std::string::npos) << closeLine;
  EXPECT_NE(closeLine.find("1 large ones waited for an eager credit"), std::string::npos) << closeLine;
  EXPECT_NE(closeLine.find("at most 2 of 2 lanes at once"), std::string::npos) << "spread over both helper lanes";
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
  testing::takeInfos();
  comm.reset();
  const std::regex waits(R"(waited for socket space (\d+) times, ([\d.]+) ms in all)");
  std::smatch m;
  bool found = false;
  for (auto& line : testing::takeInfos())
    if (std::regex_search(line, m, waits)) {
      found = true;
      EXPECT_GE(std::stoi(m[1]), 2) << "each of the two lanes waited";
      EXPECT_GE(std::stod(m[2]), 40.0) << "two lanes, 30 ms each at least";
    }
  EXPECT_TRUE(found) << "no close line with the waits for socket space";
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
