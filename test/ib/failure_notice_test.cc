// The pieces of silent-loss detection that need no RDMA device: the QP retry budget arithmetic and the failure
// notice a failing comm sends its peer over the out-of-band control connection (real sockets).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/handshake.h"
#include "transport/ib/ib_qp.h"

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

}  // namespace
}  // namespace icn::ib
