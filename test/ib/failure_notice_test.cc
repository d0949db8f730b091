// The pieces of silent-loss detection that need no RDMA device: the QP retry budget arithmetic and the failure
// notice a failing comm sends its peer over the out-of-band control connection (real sockets).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/handshake.h"
#include "transport/ib/ib_qp.h"
#include "transport/ib/ib_wire.h"

namespace icn::ib {
namespace {

TEST(RetryBudget, FollowsTheIbFormula) {
  // 4.096 us x 2^timeout per try, retry_cnt + 1 tries.
  EXPECT_NEAR(budgetSeconds(QpTuning{18, 7, 0, 0}), 4.096e-6 * 262144 * 8, 1e-9);
  EXPECT_NEAR(budgetSeconds(QpTuning{14, 0, 0, 0}), 4.096e-6 * 16384, 1e-9);
  EXPECT_GT(budgetSeconds(QpTuning{31, 7, 0, 0}), 3600.0);
}

struct SocketPair {
  SocketPair() { ok = socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0; }
  int sv[2] = {-1, -1};
  bool ok = false;
};

TEST(FailureNotice, PeerLearnsTheReason) {
  SocketPair sp;
  ASSERT_TRUE(sp.ok);
  ControlChannel failing(Fd(sp.sv[0]), "hostA:1");
  ControlChannel survivor(Fd(sp.sv[1]), "hostB:2");
  EXPECT_EQ(survivor.checkAlive(), Status::Ok);  // nothing said yet
  EXPECT_EQ(survivor.deadReason(), "");
  failing.notifyFailure("no completion on QP 17 beyond the QP retry budget");
  failing.notifyFailure("a second reason is not sent");
  // checkAlive polls at most every 50 ms: give it a few tries (bounded).
  Status st = Status::Ok;
  for (int i = 0; i < 100 && st == Status::Ok; ++i) {
    st = survivor.checkAlive();
    if (st == Status::Ok) usleep(10000);
  }
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_EQ(survivor.deadReason(), "peer reports: no completion on QP 17 beyond the QP retry budget");
}

TEST(FailureNotice, LongReasonIsTruncatedNotLost) {
  SocketPair sp;
  ASSERT_TRUE(sp.ok);
  ControlChannel failing(Fd(sp.sv[0]), "hostA:1");
  ControlChannel survivor(Fd(sp.sv[1]), "hostB:2");
  failing.notifyFailure(std::string(1000, 'x'));
  Status st = Status::Ok;
  for (int i = 0; i < 100 && st == Status::Ok; ++i) {
    st = survivor.checkAlive();
    if (st == Status::Ok) usleep(10000);
  }
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_EQ(survivor.deadReason(), "peer reports: " + std::string(255, 'x'));
}

// The reason is the peer's text and lands in our log: control characters never get through.
TEST(FailureNotice, ControlCharactersAreNeutralised) {
  SocketPair sp;
  ASSERT_TRUE(sp.ok);
  ControlChannel failing(Fd(sp.sv[0]), "hostA:1");
  ControlChannel survivor(Fd(sp.sv[1]), "hostB:2");
  failing.notifyFailure("bad\n[1] WARN forged\x1b[2J");
  Status st = Status::Ok;
  for (int i = 0; i < 100 && st == Status::Ok; ++i) {
    st = survivor.checkAlive();
    if (st == Status::Ok) usleep(10000);
  }
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_EQ(survivor.deadReason(), "peer reports: bad?[1] WARN forged?[2J");
}

TEST(FailureNotice, PlainCloseStillReportsTheExit) {
  SocketPair sp;
  ASSERT_TRUE(sp.ok);
  ControlChannel survivor(Fd(sp.sv[1]), "hostB:2");
  { Fd gone(sp.sv[0]); }  // the peer process exits
  Status st = Status::Ok;
  for (int i = 0; i < 100 && st == Status::Ok; ++i) {
    st = survivor.checkAlive();
    if (st == Status::Ok) usleep(10000);
  }
  EXPECT_EQ(st, Status::RemoteError);
  EXPECT_NE(survivor.deadReason().find("closed its control connection"), std::string::npos) << survivor.deadReason();
}

// Polls until the channel reports a message or dies (bounded: checkAlive reads at most every 50 ms).
Status readOne(ControlChannel& c, std::vector<uint8_t>* msg) {
  for (int i = 0; i < 100; ++i) {
    if (Status st = c.checkAlive(); st != Status::Ok) return st;
    if (c.nextMessage(msg)) return Status::Ok;
    usleep(10000);
  }
  return Status::InternalError;  // nothing within 1 s
}

TEST(ControlMessages, FramesArriveWholeAndInOrder) {
  SocketPair sp;
  ASSERT_TRUE(sp.ok);
  ControlChannel a(Fd(sp.sv[0]), "hostA:1"), b(Fd(sp.sv[1]), "hostB:2");
  a.enableMessages();
  b.enableMessages();
  const std::vector<uint8_t> one{1, 2, 3}, two(ControlChannel::kMaxMessage, 0x5a);
  ASSERT_TRUE(a.sendMessage(one));
  ASSERT_TRUE(a.sendMessage(two));
  EXPECT_FALSE(a.sendMessage(std::vector<uint8_t>(ControlChannel::kMaxMessage + 1))) << "over the frame limit";
  std::vector<uint8_t> got;
  ASSERT_EQ(readOne(b, &got), Status::Ok);
  EXPECT_EQ(got, one);
  ASSERT_TRUE(b.nextMessage(&got) || readOne(b, &got) == Status::Ok);
  EXPECT_EQ(got, two);
  EXPECT_FALSE(b.nextMessage(&got));
  EXPECT_EQ(b.checkAlive(), Status::Ok);
}

// A channel that did not ask for messages, an oversized frame, a flood of unread messages, bytes that are no
// frame: each ends the connection with a reason, never a buffer that grows.
TEST(ControlMessages, PeerBreakingTheFramingIsGone) {
  struct Case {
    std::vector<uint8_t> bytes;
    bool enable;
    const char* reason;
  };
  std::vector<uint8_t> flood;
  for (size_t i = 0; i <= ControlChannel::kMaxInbox; ++i) flood.insert(flood.end(), {0xF8, 1, 0, 7});
  const std::vector<Case> cases = {
      {{0xF8, 1, 0, 7}, false, "unexpected data"},
      {{0xF8, 0x01, 0x04}, true, "control message of 1025 bytes"},
      {flood, true, "control messages unread"},
      {{0x42, 0, 0}, true, "unexpected data"},
  };
  for (const Case& c : cases) {
    SocketPair sp;
    ASSERT_TRUE(sp.ok);
    ControlChannel victim(Fd(sp.sv[1]), "hostB:2");
    if (c.enable) victim.enableMessages();
    ASSERT_EQ(::send(sp.sv[0], c.bytes.data(), c.bytes.size(), 0), ssize_t(c.bytes.size()));
    std::vector<uint8_t> msg;
    Status st = Status::Ok;
    for (int i = 0; i < 100 && st == Status::Ok; ++i) {
      st = victim.checkAlive();
      if (st == Status::Ok) usleep(10000);
    }
    EXPECT_EQ(st, Status::RemoteError) << c.reason;
    EXPECT_NE(victim.deadReason().find(c.reason), std::string::npos) << victim.deadReason();
    close(sp.sv[0]);
  }
}

TEST(FailoverNote, RoundTripsAndRefusesMalformedNotes) {
  FailoverNote r;
  r.type = NoteType::Report;
  r.link = 1;
  r.nextSeq = 70;
  PendingRecv p;
  p.slot = 5;
  p.nsub = 2;
  p.seq = 69;  // 69 % 32 == 5
  p.have = {0x3, 0x1};
  r.pending.push_back(p);
  FailoverNote back;
  std::string why;
  ASSERT_EQ(decodeNote(encodeNote(r), &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.type, NoteType::Report);
  EXPECT_EQ(back.link, 1);
  EXPECT_EQ(back.nextSeq, 70u);
  ASSERT_EQ(back.pending.size(), 1u);
  EXPECT_EQ(back.pending[0].seq, 69u);
  EXPECT_EQ(back.pending[0].have[0], 0x3);
  EXPECT_EQ(back.pending[0].have[1], 0x1);
  FailoverNote fence;
  fence.link = 3;
  ASSERT_EQ(decodeNote(encodeNote(fence), &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.type, NoteType::Fence);
  EXPECT_EQ(back.link, 3);

  auto refused = [&](std::vector<uint8_t> bytes, const char* what) {
    std::string w;
    EXPECT_EQ(decodeNote(bytes, &back, &w), Status::RemoteError) << what;
    EXPECT_NE(w.find("bad failover note"), std::string::npos) << what;
  };
  const std::vector<uint8_t> good = encodeNote(r);
  refused({}, "empty");
  refused({9, 0}, "unknown type");
  refused({1, kMaxVDevMembers}, "link beyond the members");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), "truncated");
  auto extra = good;
  extra.push_back(0);
  refused(extra, "trailing byte");
  auto count = good;
  count[6] = kFifoSlots + 1;  // type link nextSeq(4) count
  refused(count, "more pending receives than slots");
  auto slot = good;
  slot[7] = 6;  // slot 6 with a sequence of slot 5
  refused(slot, "sequence of another slot");
  auto nsub = good;
  nsub[8] = kMaxRecvs + 1;
  refused(nsub, "too many sub-requests");
  FailoverNote twice = r;
  twice.pending.push_back(p);
  refused(encodeNote(twice), "one slot listed twice");

  FailoverNote offer;
  offer.type = NoteType::Rejoin;
  offer.link = 1;
  offer.offer = 0x01020304;
  offer.qpns = {17, 0xabcdef};
  ASSERT_EQ(decodeNote(encodeNote(offer), &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.type, NoteType::Rejoin);
  EXPECT_EQ(back.offer, offer.offer);
  EXPECT_EQ(back.qpns, offer.qpns);
  // Answers name the offer they answer: a sender tells a late answer from the one to its current offer.
  FailoverNote accept = offer;
  accept.type = NoteType::Accept;
  accept.offer = 7;
  ASSERT_EQ(decodeNote(encodeNote(accept), &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.type, NoteType::Accept);
  EXPECT_EQ(back.offer, 7u);
  EXPECT_EQ(back.qpns, offer.qpns);
  FailoverNote refuse;
  refuse.type = NoteType::Refuse;
  refuse.link = 2;
  refuse.offer = 0xfffffffe;
  ASSERT_EQ(decodeNote(encodeNote(refuse), &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.type, NoteType::Refuse);
  EXPECT_EQ(back.link, 2);
  EXPECT_EQ(back.offer, 0xfffffffeu);
  EXPECT_TRUE(back.qpns.empty());
  refused({3, 1, 0, 0, 0, 0, 0}, "a rejoin offering no QP");
  refused({4, 1, 0, 0, 0, 0, kMaxQps + 1}, "an accept of more QPs than a connection has");
  refused({3, 1, 0, 0, 0, 0, 2, 1, 0, 0, 0}, "a rejoin cut short");
  refused({3, 1, 0, 0}, "a rejoin without its whole offer number");
  refused({5, 1, 9, 0}, "a refusal without its whole offer number");
  refused({5, 1, 9, 0, 0, 0, 0}, "a refusal with a byte after its offer number");
}

}  // namespace
}  // namespace icn::ib
