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
