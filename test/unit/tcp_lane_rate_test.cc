// A send lane's rate with failover: the comm hands it the kernel's acknowledged bytes and busy time per look, and
// the lane turns them into the rate its message shares follow.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <vector>

#include "tcp_test_wire.h"
#include "transport/tcp/tcp_info.h"
#include "transport/tcp/tcp_lane.h"

namespace icn::tcp {
namespace {

class LaneRate : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    far = Fd(sv[1]);
    lane = std::make_unique<SendHelper>(Fd(sv[0]), failure, 1, std::chrono::milliseconds(1000), true);
  }
  void TearDown() override { lane->stop(); }
  FailureState failure{"peer-under-test"};
  Fd far;
  std::unique_ptr<SendHelper> lane;
};

constexpr int64_t kMs = 1'000'000;

TEST_F(LaneRate, OneSampleIsTheBytesOverAHundredMillisecondsOfBusyTime) {
  lane->noteBusy(5'000'000, 50 * kMs);
  EXPECT_EQ(lane->samples(), 0u) << "half a sample's busy time is not a sample yet";
  EXPECT_EQ(lane->measuredRate(), 0.0);
  lane->noteBusy(5'000'000, 50 * kMs);
  EXPECT_EQ(lane->samples(), 1u);
  EXPECT_NEAR(lane->measuredRate(), 100e6, 1e3);
}

// The kernel keeps busy time in jiffies: a lane whose sends are shorter than one gets a jiffy for some looks and
// nothing for the others. The bytes of the looks with nothing belong to the same busy time.
TEST_F(LaneRate, BytesOfLooksWithoutBusyTimeCount) {
  for (int look = 0; look < 100; look++) lane->noteBusy(1'000'000, look % 4 == 3 ? 4 * kMs : 0);
  ASSERT_EQ(lane->samples(), 1u);
  EXPECT_NEAR(lane->measuredRate(), 1e9, 1e3) << "100 MB over 100 ms of busy time";
}

TEST_F(LaneRate, ALookWithNothingMovedAddsNothing) {
  lane->noteBusy(10'000'000, 100 * kMs);
  lane->noteBusy(0, 0);
  EXPECT_EQ(lane->samples(), 1u);
  EXPECT_NEAR(lane->measuredRate(), 100e6, 1e3);
}

// Busy time without acknowledged bytes is a link that stalls: the sample is low and replaces the rate at once.
TEST_F(LaneRate, ASampleUnderHalfTheRateReplacesIt) {
  lane->noteBusy(10'000'000, 100 * kMs);
  lane->noteBusy(1'000'000, 100 * kMs);
  EXPECT_EQ(lane->samples(), 2u);
  EXPECT_NEAR(lane->measuredRate(), 10e6, 1e3);
}

// The kernel's busy time is the sum of its three chronographs (busy, limited by the peer's window, limited by the
// send buffer): a socket whose peer stops reading is busy for as long as that lasts, not twice as long.
TEST(TcpBusyTime, APeerThatStopsReadingCountsItsTimeOnce) {
  Fd mine, theirs;
  testwire::loopbackTcpPair(&mine, &theirs);
  TcpBusy before;
  ASSERT_TRUE(tcpBusy(mine.get(), &before)) << "the kernel gives no busy time (before Linux 4.10)";
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> block(1 << 16, 0x5a);
  while (::send(mine.get(), block.data(), block.size(), MSG_DONTWAIT) > 0) {  // until the peer's window is full
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  TcpBusy after;
  ASSERT_TRUE(tcpBusy(mine.get(), &after));
  const auto wallUs = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  const uint64_t busyUs = after.busyUs - before.busyUs;
  EXPECT_GE(busyUs, 200'000u) << "the socket had unsent bytes the whole time";
  EXPECT_LE(busyUs, static_cast<uint64_t>(wallUs.count()) + 20'000u) << "busy longer than the time that passed";
  EXPECT_LT(after.netUs - before.netUs, 100'000u) << "the peer's window, not the link, held the bytes back";
}

}  // namespace
}  // namespace icn::tcp
