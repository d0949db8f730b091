// Lane 0 on two rails (transport/tcp/tcp_lane0.h): the mirror over socketpairs, and a send comm and a receive comm
// joined by socketpairs whose lane 0 has a copy, one copy failing mid-stream.
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tcp_test_wire.h"
#include "transport/tcp/tcp_lane0.h"

namespace icn::tcp {
namespace {
using namespace testwire;

struct Pair {
  Fd a, b;
  Pair() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a = Fd(sv[0]);
    b = Fd(sv[1]);
  }
};

// Reads from a ByteSource until `want` bytes came or 10 s passed; false when it ended or failed first.
bool readFrom(ByteSource& src, std::vector<uint8_t>* out, size_t want) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  uint8_t buf[8192];
  while (out->size() < want && Clock::now() < deadline) {
    size_t got = 0;
    bool closed = false;
    std::string why;
    if (src.read(buf, std::min(sizeof buf, want - out->size()), &got, &closed, &why) != Status::Ok || closed)
      return false;
    out->insert(out->end(), buf, buf + got);
  }
  return out->size() == want;
}

Lane0Mirror mirrorOf(const Pair& p0, const Pair& p1, bool aSide, size_t ring = 64 * 1024) {
  return Lane0Mirror({aSide ? p0.a.get() : p0.b.get(), aSide ? p1.a.get() : p1.b.get()}, {"eth0", "eth1"}, ring,
                     kPeer);
}

TEST(Lane0Mirror, EachByteIsReadOnceFromWhicheverCopyBringsItFirst) {
  Pair p0, p1;
  Lane0Mirror in = mirrorOf(p0, p1, false);
  std::vector<uint8_t> got;
  writeAll(p1.a.get(), "abcdef", 6);  // copy 1 first
  ASSERT_TRUE(readFrom(in, &got, 6));
  writeAll(p0.a.get(), "abcdefgh", 8);  // copy 0 catches up and goes ahead: only its last two bytes are new
  ASSERT_TRUE(readFrom(in, &got, 8));
  writeAll(p1.a.get(), "ghij", 4);
  ASSERT_TRUE(readFrom(in, &got, 10));
  EXPECT_EQ(std::string(got.begin(), got.end()), "abcdefghij");
  EXPECT_EQ(in.liveCopies(), 2);
}

// Reads look at the copy that brought the last bytes; the other is looked at within a few reads when that one is
// quiet, and its duplicates are read and dropped before they pile up in its socket.
TEST(Lane0Mirror, TheOtherCopyIsReadWithinAFewPollsAndDrainedAsItGoes) {
  Pair p0, p1;
  Lane0Mirror in = mirrorOf(p0, p1, false);
  uint8_t buf[256];
  size_t got = 0;
  bool closed = false;
  std::string why;
  for (int i = 0; i < 200; i++) {  // a quiet stretch: reads settle on the lead copy (copy 0, the first)
    ASSERT_EQ(in.read(buf, sizeof buf, &got, &closed, &why), Status::Ok);
    ASSERT_EQ(got, 0u);
  }
  writeAll(p1.a.get(), "xyz", 3);  // copy 1 alone; copy 0 stays quiet
  int polls = 0;
  for (; polls < 64 && got == 0; polls++) ASSERT_EQ(in.read(buf, sizeof buf, &got, &closed, &why), Status::Ok);
  EXPECT_EQ(got, 3u);
  EXPECT_LE(polls, 9) << "the quiet copy kept the other waiting";
  writeAll(p0.a.get(), "xyz", 3);  // copy 0's duplicates
  const std::vector<uint8_t> msg = pattern(100);
  size_t most = 0;
  for (int i = 0; i < 400; i++) {  // 40 KB over both copies, 100 bytes at a time, each read as it comes
    writeAll(p0.a.get(), msg.data(), msg.size());
    writeAll(p1.a.get(), msg.data(), msg.size());
    std::vector<uint8_t> one;
    ASSERT_TRUE(readFrom(in, &one, msg.size()));
    ASSERT_TRUE(one == msg) << "message " << i;
    int queued0 = 0, queued1 = 0;
    ASSERT_EQ(::ioctl(p0.b.get(), FIONREAD, &queued0), 0);
    ASSERT_EQ(::ioctl(p1.b.get(), FIONREAD, &queued1), 0);
    most = std::max(most, static_cast<size_t>(std::max(queued0, queued1)));
  }
  EXPECT_LE(most, 8u * 1024) << "duplicates piled up in a copy's socket";
  EXPECT_EQ(in.liveCopies(), 2);
}

// One copy fails while the stream runs (its socket shut down as a dead link leaves it: no more bytes either way):
// every byte arrives once and in order over the other, and the writer names the failed copy's rail.
void streamThroughAFailure(int failing) {
  testing::installLogCapture();
  testing::takeWarnings();
  Pair p0, p1;
  Lane0Mirror out = mirrorOf(p0, p1, true), in = mirrorOf(p0, p1, false);
  const std::vector<uint8_t> data = pattern(3 << 20);
  std::vector<uint8_t> got;
  size_t queued = 0;
  std::string why;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (got.size() < data.size() && Clock::now() < deadline) {
    if (queued < data.size()) queued += out.append(data.data() + queued, std::min<size_t>(5000, data.size() - queued));
    if (out.pending()) {
      ASSERT_EQ(out.flush(&why), Status::Ok) << why;
    }
    if (got.size() >= data.size() / 3 && out.liveCopies() == 2) {
      const Pair& dead = failing == 0 ? p0 : p1;
      ::shutdown(dead.b.get(), SHUT_RDWR);  // what was in flight on it is lost with it
    }
    uint8_t buf[16384];
    size_t n = 0;
    bool closed = false;
    ASSERT_EQ(in.read(buf, sizeof buf, &n, &closed, &why), Status::Ok) << why;
    ASSERT_FALSE(closed);
    got.insert(got.end(), buf, buf + n);
  }
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data) << "bytes lost, repeated or out of order";
  EXPECT_EQ(out.liveCopies(), 1);
  EXPECT_FALSE(out.live(failing));
  EXPECT_TRUE(testing::warned(testing::takeWarnings(),
                              {kPeer, failing == 0 ? "lane 0 over eth0" : "lane 0 over eth1", "goes on over"}));
}

TEST(Lane0Mirror, StreamOutlivesTheFirstCopy) { streamThroughAFailure(0); }
TEST(Lane0Mirror, StreamOutlivesTheSecondCopy) { streamThroughAFailure(1); }

// A copy whose peer end stops reading (a rail down: its socket takes bytes until its buffer is full) while the
// other moves: dropped once it holds the ring full half a ring behind, with a WARN; the other copy has every byte.
TEST(Lane0Mirror, ACopyThatFallsARingBehindIsDropped) {
  testing::installLogCapture();
  testing::takeWarnings();
  Pair p0, p1;
  shrinkSendBuffer(p0.a);
  Lane0Mirror out = mirrorOf(p0, p1, true, 64 * 1024);
  const std::vector<uint8_t> data = pattern(1 << 20);
  std::vector<uint8_t> got;
  size_t queued = 0;
  std::string why;
  SocketSource reader(p1.b.get());  // the peer reads copy 1 only
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (got.size() < data.size() && Clock::now() < deadline) {
    if (queued < data.size()) queued += out.append(data.data() + queued, data.size() - queued);
    if (out.pending()) {
      ASSERT_EQ(out.flush(&why), Status::Ok) << why;
    }
    uint8_t buf[16384];
    size_t n = 0;
    bool closed = false;
    ASSERT_EQ(reader.read(buf, sizeof buf, &n, &closed, &why), Status::Ok);
    got.insert(got.end(), buf, buf + n);
  }
  EXPECT_TRUE(got == data);
  EXPECT_FALSE(out.live(0)) << "the copy nobody read was kept";
  EXPECT_TRUE(out.live(1));
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer, "lane 0 over eth0", "behind", "eth1"}));
}

// Both copies ended by the peer: the stream ended. Both failed: an error naming the last one.
TEST(Lane0Mirror, EndsOnlyWhenBothCopiesAreGone) {
  {
    Pair p0, p1;
    Lane0Mirror in = mirrorOf(p0, p1, false);
    p0.a.reset();
    uint8_t buf[16];
    size_t n = 0;
    bool closed = false;
    std::string why;
    ASSERT_EQ(in.read(buf, sizeof buf, &n, &closed, &why), Status::Ok);
    EXPECT_FALSE(closed) << "one copy ended: the stream goes on over the other";
    writeAll(p1.a.get(), "xy", 2);
    std::vector<uint8_t> got;
    ASSERT_TRUE(readFrom(in, &got, 2));
    p1.a.reset();
    ASSERT_EQ(in.read(buf, sizeof buf, &n, &closed, &why), Status::Ok);
    EXPECT_TRUE(closed);
  }
  {
    testing::installLogCapture();
    Pair p0, p1;
    Lane0Mirror out = mirrorOf(p0, p1, true);
    p0.b.reset();
    p1.b.reset();
    ASSERT_EQ(out.append("hello", 5), 5u);
    std::string why;
    EXPECT_EQ(out.flush(&why), Status::RemoteError);
    EXPECT_NE(why.find("lane 0 over eth"), std::string::npos) << why;
    EXPECT_EQ(out.liveCopies(), 0);
  }
}

// A send comm and a receive comm joined by socketpairs (or loopback TCP, where a dropped copy must be offered
// again from an address), each with lane 0 on two "rails" and two helper lanes; `copyFd` dups of the send comm's
// lane 0 copies, to fail them from outside.
struct CommPair {
  std::unique_ptr<TcpSendComm> tx;
  std::unique_ptr<TcpRecvComm> rx;
  int copyFd[2] = {-1, -1};
  CommPair(bool overTcp, std::vector<std::string> rails) {
    Sockets send, recv;  // the two comms are each other's peer
    auto join = [overTcp](Fd* x, Fd* y) {
      if (overTcp) {
        loopbackTcpPair(x, y);
        return;
      }
      int sv[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
      *x = Fd(sv[0]);
      *y = Fd(sv[1]);
    };
    join(&send.control, &recv.control);
    for (int i = 0; i < 3; i++) {
      send.lanes.emplace_back();
      recv.lanes.emplace_back();
      join(&send.lanes.back(), &recv.lanes.back());
    }
    join(&send.lane0Copy, &recv.lane0Copy);
    copyFd[0] = dup(send.lanes[0].get());
    copyFd[1] = dup(send.lane0Copy.get());
    for (Sockets* k : {&send, &recv}) {
      k->eagerBytes = 2048;
      k->railNames = rails;
      k->laneRail = {0, 0, 1};
      k->lane0CopyRail = 1;
    }
    tx = std::make_unique<TcpSendComm>(std::move(send), kPeer, NetCommInfo{});
    rx = std::make_unique<TcpRecvComm>(std::move(recv), kPeer, NetCommInfo{});
  }
  ~CommPair() {
    tx.reset();
    rx.reset();
    for (int fd : copyFd) close(fd);
  }
};

// Messages of mixed sizes, all on lane 0 (eager and after their records), between a CommPair over socketpairs;
// `failing` (0 or 1): lane 0's copy that is shut down once a third of the messages arrived.
void commsThroughAFailure(int failing) {
  testing::installLogCapture();
  testing::takeWarnings();
  CommPair comms(false, {"eth0 -> 10.0.0.2", "eth1 -> 10.0.1.2"});
  TcpSendComm* tx = comms.tx.get();
  TcpRecvComm* rx = comms.rx.get();
  const int* copyFds = comms.copyFd;
  constexpr int kMessages = 300;
  size_t sent = 0, received = 0;
  std::vector<std::vector<uint8_t>> in(kMessages);
  auto sizeOf = [](int i) { return static_cast<size_t>(i % 3 == 0 ? 40000 : 1 + i * 13 % 2048); };
  std::vector<std::vector<uint8_t>> data;
  for (int i = 0; i < kMessages; i++) {
    data.push_back(pattern(sizeOf(i)));
    data.back()[0] = static_cast<uint8_t>(i);
  }
  Request* sreq = nullptr;
  Request* rreq = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (received < kMessages && Clock::now() < deadline) {
    if (!rreq && static_cast<int>(received) < kMessages) {
      in[received].assign(sizeOf(static_cast<int>(received)), 0);
      void* d = in[received].data();
      size_t n = in[received].size();
      int tag = 7;
      ASSERT_EQ(rx->irecv(1, &d, &n, &tag, nullptr, &rreq), Status::Ok);
    }
    if (!sreq && static_cast<int>(sent) < kMessages) {
      ASSERT_EQ(tx->isend(data[sent].data(), data[sent].size(), 7, nullptr, &sreq), Status::Ok);
    }
    bool done = false;
    if (sreq) {
      ASSERT_EQ(sreq->test(&done, nullptr), Status::Ok);
      if (done) sreq = nullptr, sent++;
    }
    if (rreq) {
      int size = 0;
      ASSERT_EQ(rreq->test(&done, &size), Status::Ok);
      if (done) {
        EXPECT_EQ(static_cast<size_t>(size), data[received].size());
        EXPECT_TRUE(in[received] == data[received]) << "message " << received;
        rreq = nullptr;
        received++;
      }
    }
    if (received == kMessages / 3 && copyFds[failing] >= 0) ::shutdown(copyFds[failing], SHUT_RDWR);
  }
  EXPECT_EQ(received, static_cast<size_t>(kMessages));
  EXPECT_TRUE(testing::warned(testing::takeWarnings(),
                              {kPeer, failing == 0 ? "lane 0 over eth0" : "lane 0 over eth1", "goes on over"}));
}

TEST(Lane0OnTwoRails, MessagesAndRecordsOutliveLaneZerosFirstCopy) { commsThroughAFailure(0); }
TEST(Lane0OnTwoRails, MessagesAndRecordsOutliveLaneZerosSecondCopy) { commsThroughAFailure(1); }

// Over loopback TCP (a dropped copy is offered again from its own address): copy 0 fails, comes back on a new
// socket (an INFO on each side), then copy 1 fails, and the stream goes on over the copy that came back. Every
// message intact, in order.
TEST(Lane0OnTwoRails, ADroppedCopyComesBackAndCarriesTheStream) {
  testing::installLogCapture();
  testing::takeWarnings();
  testing::takeInfos();
  CommPair comms(true, {"lo -> 127.0.0.1", "lo2 -> 127.0.0.1"});
  TcpSendComm* tx = comms.tx.get();
  TcpRecvComm* rx = comms.rx.get();
  const int copy0 = comms.copyFd[0], copy1 = comms.copyFd[1];
  std::vector<uint8_t> out = pattern(3000), in(3000);
  uint64_t messages = 0;
  int phase = 0;  // 0: both copies; 1: copy 0 failed; 2: it is back, copy 1 failed
  size_t backLines = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  auto phaseAt = Clock::now();
  while (Clock::now() < deadline && !(phase == 2 && Clock::now() - phaseAt > std::chrono::milliseconds(300))) {
    out[0] = static_cast<uint8_t>(messages);
    void* d = in.data();
    size_t n = in.size();
    int tag = 3;
    Request *rr = nullptr, *sr = nullptr;
    ASSERT_EQ(rx->irecv(1, &d, &n, &tag, nullptr, &rr), Status::Ok);
    ASSERT_EQ(tx->isend(out.data(), out.size(), 3, nullptr, &sr), Status::Ok);
    ASSERT_NE(rr, nullptr);
    ASSERT_NE(sr, nullptr);
    bool sdone = false, rdone = false;
    while (!(sdone && rdone) && Clock::now() < deadline) {
      if (!sdone) {
        ASSERT_EQ(sr->test(&sdone, nullptr), Status::Ok) << "message " << messages;
      }
      if (!rdone) {
        ASSERT_EQ(rr->test(&rdone, nullptr), Status::Ok) << "message " << messages;
      }
    }
    ASSERT_TRUE(sdone && rdone) << "message " << messages << " never finished";
    ASSERT_TRUE(in == out) << "message " << messages;
    messages++;
    if (phase == 0 && messages == 50) {
      ::shutdown(copy0, SHUT_RDWR);
      phase = 1;
    }
    if (phase == 1) {
      for (const std::string& line : testing::takeInfos())
        backLines += line.find("lane 0 over lo -> 127.0.0.1 is back") != std::string::npos;
      if (backLines == 2) {  // both ends
        ::shutdown(copy1, SHUT_RDWR);
        phase = 2;
        phaseAt = Clock::now();
      }
    }
  }
  EXPECT_EQ(phase, 2) << "copy 0 never came back (" << backLines << " of 2 ends said so)";
  printf("%llu messages over lane 0 through both copies' failures\n", static_cast<unsigned long long>(messages));
  const std::vector<std::string> warns = testing::takeWarnings();
  EXPECT_TRUE(testing::warned(warns, {kPeer, "lane 0 over lo -> 127.0.0.1:", "goes on over lo2"}));
  EXPECT_TRUE(testing::warned(warns, {kPeer, "lane 0 over lo2 -> 127.0.0.1:", "goes on over lo ->"}));
}

// A hostile sender on a receive comm whose lane 0 has two copies: whatever the two copies say, the comm parses one
// stream, each byte taken once from the copy that brought it first; bytes a copy repeats differently are dropped
// unread, and garbage ahead of what was read fails the connection with a WARN naming the peer.
TEST(Lane0OnTwoRails, ReceiverParsesOneStreamWhateverTheCopiesSay) {
  testing::installLogCapture();
  testing::takeWarnings();
  Sockets s;
  std::vector<Fd> peer;  // control, lane 0, two helper lanes, lane 0's copy
  auto pair = [&](Fd* mine) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    *mine = Fd(sv[0]);
    peer.emplace_back(sv[1]);
  };
  pair(&s.control);
  for (int i = 0; i < 3; i++) {
    s.lanes.emplace_back();
    pair(&s.lanes.back());
  }
  pair(&s.lane0Copy);
  s.eagerBytes = 2048;
  s.railNames = {"eth0 <- 10.0.0.1", "eth1 <- 10.0.1.1"};
  s.laneRail = {0, 0, 1};
  s.lane0CopyRail = 1;
  auto rx = std::make_unique<TcpRecvComm>(std::move(s), kPeer, NetCommInfo{});
  const int copy[2] = {peer[1].get(), peer[4].get()};
  auto postOne = [&](std::vector<uint8_t>* buf, CtsHeader* cts) {
    void* d = buf->data();
    size_t n = buf->size();
    int tag = 5;
    Request* r = nullptr;
    EXPECT_EQ(rx->irecv(1, &d, &n, &tag, nullptr, &r), Status::Ok);
    CtsEntry e;
    for (int c : copy) {  // the record goes out on both copies
      EXPECT_TRUE(readAll(c, cts, sizeof *cts));
      EXPECT_TRUE(readAll(c, &e, sizeof e));
    }
    return r;
  };
  const std::vector<uint8_t> data = pattern(100);
  std::vector<uint8_t> wrong(100, 0xEE), buf(100);
  CtsHeader cts;
  Request* r = postOne(&buf, &cts);
  ASSERT_NE(r, nullptr);
  const ChunkHeader h = chunk(cts, 0, 5, 100, 0, 100);
  sendChunk(copy[0], h, data);  // copy 0 brings the message first
  EXPECT_EQ(finish(r), Status::Ok);
  EXPECT_TRUE(buf == data);
  sendChunk(copy[1], h, wrong);  // copy 1 repeats those bytes, differently: dropped unread
  std::vector<uint8_t> buf2(100);
  CtsHeader cts2;
  Request* r2 = postOne(&buf2, &cts2);
  ASSERT_NE(r2, nullptr);
  sendChunk(copy[1], chunk(cts2, 0, 5, 100, 0, 100), data);  // now copy 1 is first: it is read
  EXPECT_EQ(finish(r2), Status::Ok);
  EXPECT_TRUE(buf2 == data) << "the second message did not come from copy 1 whole";
  EXPECT_TRUE(testing::takeWarnings().empty());
  std::vector<uint8_t> buf3(100);
  CtsHeader cts3;
  Request* r3 = postOne(&buf3, &cts3);
  ASSERT_NE(r3, nullptr);
  const std::vector<uint8_t> garbage(sizeof(ChunkHeader), 0x5A), stale(sizeof(ChunkHeader) + 100, 0xEE);
  writeAll(copy[0], stale.data(), stale.size());  // copy 0 catches up on message 2, wrongly: dropped
  writeAll(copy[0], garbage.data(), garbage.size());            // then garbage ahead of what was read
  EXPECT_EQ(finish(r3), Status::RemoteError);
  EXPECT_TRUE(std::all_of(buf3.begin(), buf3.end(), [](uint8_t b) { return b == 0; })) << "garbage landed";
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {kPeer}));
  rx.reset();
}

}  // namespace
}  // namespace icn::tcp
