// Connections the application does not call are tended by the calls into the thread's other connections
// (plugin/transport/tcp/tcp_tending.h).
#include "transport/tcp/tcp_tending.h"

#include <gtest/gtest.h>

#include <thread>

namespace icn::tcp {
namespace {

struct FakeConn final : Tended {
  FakeConn() { Tending::enroll(this); }
  ~FakeConn() override { Tending::leave(this); }
  bool recoveryPending() const override { return pending; }
  void tend() override { tends++; }
  bool pending = false;
  int tends = 0;
};

// Each case starts well past the previous one's tick (the process ticks at most every kTendEveryNs), and past any
// steady clock reading of a real connection in the same process.
int64_t base() {
  static int64_t t = int64_t{1} << 62;
  t += int64_t{1} << 32;
  return t;
}

TEST(Tending, AnIdleConnectionWithRecoveryPendingIsTendedByAnotherOnesCall) {
  FakeConn idle, busy;
  const int64_t t0 = base();
  idle.called(t0);  // its thread is this one
  idle.pending = true;
  busy.called(t0 + kTendQuietNs + 1);
  EXPECT_EQ(idle.tends, 1);
  EXPECT_EQ(busy.tends, 0);  // never tended from its own call
}

TEST(Tending, NothingPendingOrCalledRecentlyIsLeftAlone) {
  FakeConn calm, recent, control, busy;
  const int64_t t0 = base();
  calm.called(t0);        // ticks (nothing to tend yet)
  control.called(t0);     // within that tick's interval: no tick
  recent.called(t0 + 1);  // likewise
  control.pending = recent.pending = true;
  busy.called(t0 + kTendQuietNs);  // ticks
  EXPECT_EQ(control.tends, 1);     // the tick ran
  EXPECT_EQ(calm.tends, 0);        // nothing pending
  EXPECT_EQ(recent.tends, 0);      // called under kTendQuietNs ago
}

TEST(Tending, AtMostOneTickPerInterval) {
  FakeConn idle, busy;
  const int64_t t0 = base();
  idle.called(t0);
  idle.pending = true;
  busy.called(t0 + kTendQuietNs + 1);
  busy.called(t0 + kTendQuietNs + 2);  // within the same interval
  EXPECT_EQ(idle.tends, 1);
  busy.called(t0 + kTendQuietNs + 1 + kTendEveryNs);
  EXPECT_EQ(idle.tends, 2);
}

TEST(Tending, AnotherThreadsConnectionIsNotTended) {
  FakeConn theirs, control, mine;
  const int64_t t0 = base();
  std::thread([&] { theirs.called(t0); }).join();  // ticks
  control.called(t0);                               // within that tick's interval: no tick
  theirs.pending = control.pending = true;
  mine.called(t0 + kTendQuietNs + 1);
  EXPECT_EQ(control.tends, 1);
  EXPECT_EQ(theirs.tends, 0);
}

TEST(Tending, ALeftConnectionIsNotTended) {
  FakeConn control, busy;
  const int64_t t0 = base();
  {
    FakeConn gone;
    gone.called(t0);  // ticks
    gone.pending = true;
  }
  control.called(t0);
  control.pending = true;
  busy.called(t0 + kTendQuietNs + 1);  // would tend `gone` were it still enrolled (a use after free)
  EXPECT_EQ(control.tends, 1);
}

}  // namespace
}  // namespace icn::tcp
