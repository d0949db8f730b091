// The handshake state machine over a real socketpair: both roles, authentication on and off.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/params.h"

using namespace icn;

namespace {
struct Result {
  Status connector = Status::Ok, acceptor = Status::Ok;
  bool done = false;
  Hello seenByConnector, seenByAcceptor;
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
  for (int i = 0; i < 1000 && !(pc == Handshake::Phase::Done && pa == Handshake::Phase::Done); i++) {
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
    if (r.connector != Status::Ok || r.acceptor != Status::Ok) break;
  }
  r.done = pc == Handshake::Phase::Done && pa == Handshake::Phase::Done;
  r.seenByConnector = c.peer();
  r.seenByAcceptor = a.peer();
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
  Result wrong = run("job-secret-0123456789", "other-secret-0123456789");
  EXPECT_FALSE(wrong.done);
  EXPECT_TRUE(wrong.connector != Status::Ok || wrong.acceptor != Status::Ok);
  Result oneSided = run(nullptr, "job-secret-0123456789");
  EXPECT_FALSE(oneSided.done);
  Result otherSide = run("job-secret-0123456789", nullptr);
  EXPECT_FALSE(otherSide.done);
}
