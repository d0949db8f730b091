// The handshake state machine over a real socketpair: both roles, authentication on and off.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/params.h"
#include "../reliability/log_capture.h"

using namespace icn;

namespace {
struct Result {
  Status connector = Status::Ok, acceptor = Status::Ok;
  bool done = false;
  Hello seenByConnector, seenByAcceptor;
  std::vector<std::string> warnings;
};

Result run(const char* keyConnector, const char* keyAcceptor) {
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
  auto setKey = [](const char* k) {
    if (k) setenv("ICN_AUTH_KEY", k, 1); else unsetenv("ICN_AUTH_KEY");
    params::reloadForTesting();
    auth::resetForTesting();
  };
  // Both ends live in this process, so the key is switched around each step.
  setKey(keyConnector);
  Handshake c(Fd(sv[0]), Handshake::Role::Connector, "acceptor", makeLocalHello(1, 7, {1, 2, 3}));
  setKey(keyAcceptor);
  Handshake a(Fd(sv[1]), Handshake::Role::Acceptor, "connector", makeLocalHello(1, 7, {}));
  Result r;
  bool cConfirmed = false, aConfirmed = false;
  Handshake::Phase pc = Handshake::Phase::InProgress, pa = Handshake::Phase::InProgress;
  icn::testing::installLogCapture();
  icn::testing::takeWarnings();
  // Until each side has finished or failed: a refusal on one side must end the other promptly too (it sees the
  // close), so a side still in progress after the loop is a stall, not a refusal.
  auto over = [&](Status st, Handshake::Phase p) { return st != Status::Ok || p == Handshake::Phase::Done; };
  for (int i = 0; i < 1000 && !(over(r.connector, pc) && over(r.acceptor, pa)); i++) {
    setKey(keyAcceptor);
    if (r.acceptor == Status::Ok && pa != Handshake::Phase::Done) {
      r.acceptor = a.progress(&pa);
      if (pa == Handshake::Phase::PeerKnown && !aConfirmed) {
        a.confirm({9, 9});
        aConfirmed = true;
      }
    }
    setKey(keyConnector);
    if (r.connector == Status::Ok && pc != Handshake::Phase::Done) {
      r.connector = c.progress(&pc);
      if (pc == Handshake::Phase::PeerKnown && !cConfirmed) {
        c.confirm();
        cConfirmed = true;
      }
    }
  }
  r.done = pc == Handshake::Phase::Done && pa == Handshake::Phase::Done;
  r.seenByConnector = c.peer();
  r.seenByAcceptor = a.peer();
  r.warnings = icn::testing::takeWarnings();
  setKey(nullptr);
  return r;
}
}  // namespace

TEST(Handshake, CompletesAndExchangesBlobs) {
  Result r = run(nullptr, nullptr);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.seenByAcceptor.blob, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(r.seenByConnector.blob, (std::vector<uint8_t>{9, 9}));
  EXPECT_EQ(r.seenByConnector.commId, 7u);
}

TEST(Handshake, SameKeyAuthenticates) {
  Result r = run("job-secret-0123456789", "job-secret-0123456789");
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.seenByConnector.mac.size(), 32u);
}

TEST(Handshake, WrongOrMissingKeyIsRefused) {
  using icn::testing::warned;
  Result wrong = run("job-secret-0123456789", "other-secret-0123456789");
  EXPECT_FALSE(wrong.done);
  EXPECT_EQ(wrong.acceptor, Status::RemoteError);
  EXPECT_EQ(wrong.connector, Status::RemoteError);
  EXPECT_TRUE(warned(wrong.warnings, {"did not prove knowledge of the job key (ICN_AUTH_KEY)"}));
  // A key on one side only: the acceptor, which checks the connector's proof first, refuses and names the key;
  // the connector sees the close at once. Never a stall ended by the timeout.
  Result oneSided = run(nullptr, "job-secret-0123456789");
  EXPECT_FALSE(oneSided.done);
  EXPECT_EQ(oneSided.acceptor, Status::RemoteError);
  EXPECT_EQ(oneSided.connector, Status::RemoteError);
  EXPECT_TRUE(warned(oneSided.warnings, {"did not prove knowledge of the job key (ICN_AUTH_KEY)"}));
  Result otherSide = run("job-secret-0123456789", nullptr);
  EXPECT_FALSE(otherSide.done);
  EXPECT_EQ(otherSide.acceptor, Status::RemoteError);
  EXPECT_EQ(otherSide.connector, Status::RemoteError);
  EXPECT_TRUE(warned(otherSide.warnings, {"ICN_AUTH_KEY is set there but not here"}));
  for (const Result* r : {&wrong, &oneSided, &otherSide})
    EXPECT_FALSE(warned(r->warnings, {"not completed within"})) << "a refusal must not wait for the timeout";
}
