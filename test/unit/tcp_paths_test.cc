// The process's record of failed paths (transport/tcp/tcp_paths.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>

#include "transport/tcp/tcp_paths.h"

namespace {
using icn::SockAddr;
using icn::tcp::PathHealth;

SockAddr v4(const std::string& ip, uint16_t port) {
  SockAddr a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip.c_str(), &in->sin_addr), 1);
  a.len = sizeof(sockaddr_in);
  return a;
}

TEST(PathHealth, APathIsItsTwoAddressesWhateverThePorts) {
  PathHealth h;
  const uint64_t gen = h.generation();
  EXPECT_EQ(h.failedAt(v4("10.0.1.1", 0), v4("10.0.1.2", 4000)), 0);
  h.failed(v4("10.0.1.1", 0), v4("10.0.1.2", 4000), 1000);
  EXPECT_EQ(h.generation(), gen + 1);
  EXPECT_EQ(h.failedAt(v4("10.0.1.1", 5555), v4("10.0.1.2", 6000)), 1000) << "another socket on the same two links";
  EXPECT_EQ(h.failedAt(v4("10.0.1.1", 0), v4("10.0.1.3", 4000)), 0) << "another peer";
  EXPECT_EQ(h.failedAt(v4("10.0.1.2", 0), v4("10.0.1.1", 4000)), 0) << "the other direction is another path";
  h.failed(v4("10.0.1.1", 0), v4("10.0.1.2", 4000), 2000);
  EXPECT_EQ(h.failedAt(v4("10.0.1.1", 0), v4("10.0.1.2", 1)), 2000) << "the latest failure";
}

// Peers choose the addresses they offer: the record stays bounded, the oldest failure going first.
TEST(PathHealth, TheRecordIsBounded) {
  PathHealth h;
  const size_t n = PathHealth::kMaxPaths + 100;
  for (size_t i = 0; i < n; i++) {
    const std::string peer = "10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
                             std::to_string(i % 256);
    h.failed(v4("192.168.0.1", 0), v4(peer, 1), static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(h.failedAt(v4("192.168.0.1", 0), v4("10.0.0.0", 1)), 0) << "the oldest was kept";
  EXPECT_EQ(h.failedAt(v4("192.168.0.1", 0), v4("10.0.4.99", 1)), static_cast<int64_t>(n)) << "the newest was lost";
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    const std::string peer = "10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
                             std::to_string(i % 256);
    kept += h.failedAt(v4("192.168.0.1", 0), v4(peer, 1)) != 0;
  }
  EXPECT_EQ(kept, PathHealth::kMaxPaths);
}

}  // namespace

namespace {
using icn::tcp::judgeLaneOnPath;
using icn::tcp::kPathQuietNs;
using icn::tcp::PathVerdict;
constexpr int64_t kMs = 1'000'000;

// A connection's lane on a path another lane found dead: given up when nothing it carried since the failure was
// acknowledged, kept when something was, and never for a failure from before it connected.
TEST(PathHealth, ALaneOnAFailedPathIsJudgedByItsOwnAcknowledgements) {
  const int64_t failed = 1000 * kMs;
  EXPECT_EQ(judgeLaneOnPath(0, 0, 0, true, failed), PathVerdict::Keep) << "no failure";
  EXPECT_EQ(judgeLaneOnPath(failed, failed + kMs, failed + kMs, false, failed + 10 * kMs), PathVerdict::Keep)
      << "connected after the failure";
  EXPECT_EQ(judgeLaneOnPath(failed, 0, failed + 5 * kMs, true, failed + 10 * kMs), PathVerdict::Keep)
      << "acknowledged after the failure: its path works";
  EXPECT_EQ(judgeLaneOnPath(failed, 0, failed - 500 * kMs, false, failed + kMs), PathVerdict::GiveUp)
      << "idle since before the failure: it would be handed the next piece and stall";
  EXPECT_EQ(judgeLaneOnPath(failed, 0, failed - 500 * kMs, true, failed + kMs), PathVerdict::GiveUp)
      << "waiting, and nothing acknowledged for longer than the quiet bound";
  EXPECT_EQ(judgeLaneOnPath(failed, 0, failed - 10 * kMs, true, failed + kMs), PathVerdict::LookAgain)
      << "waiting, its last acknowledgement too recent to tell";
  EXPECT_EQ(judgeLaneOnPath(failed, 0, failed - 10 * kMs, true, failed - 10 * kMs + kPathQuietNs), PathVerdict::GiveUp)
      << "still nothing once the quiet bound passed";
}

// Sockets that are not IP (a socketpair) make no path: nothing is recorded or found for them.
TEST(PathHealth, OnlyIpAddressesMakeAPath) {
  PathHealth h;
  SockAddr unixAddr;
  unixAddr.storage.ss_family = AF_UNIX;
  const uint64_t gen = h.generation();
  h.failed(unixAddr, unixAddr, 1000);
  EXPECT_EQ(h.generation(), gen);
  EXPECT_EQ(h.failedAt(unixAddr, unixAddr), 0);
}
}  // namespace
