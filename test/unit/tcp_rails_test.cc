// Rails of a TCP connection: the acceptor's rail addresses in its control answer (bounded, validated) and the
// connector's pairing of them with its own interfaces by subnet.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tcp_test_wire.h"
#include "transport/tcp/tcp_info.h"
#include "transport/tcp/tcp_rails.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {
namespace {

SockAddr v4(const char* ip, uint16_t port = 0) {
  SockAddr a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  inet_pton(AF_INET, ip, &in->sin_addr);
  a.len = sizeof(sockaddr_in);
  return a;
}

Rail rail(const char* ifname, const char* ip, int prefix) { return Rail{ifname, v4(ip), prefix}; }

Blob answerWith(std::initializer_list<SockAddr> rails) {
  Blob b;
  b.kind = kBlobControl;
  b.value = 4;
  for (const SockAddr& a : rails) b.rails[b.nrails++] = toRailAddr(a);
  return b;
}

TEST(TcpRails, ControlBlobCarriesRailsBothWays) {
  Blob b = answerWith({v4("10.1.0.2", 4000), v4("10.2.0.2", 4001)});
  Blob out;
  std::string why;
  ASSERT_EQ(decodeBlob(encodeBlob(b), &out, &why), Status::Ok) << why;
  ASSERT_EQ(out.nrails, 2);
  EXPECT_EQ(fromRailAddr(out.rails[1]).str(), "10.2.0.2:4001");
  Blob lane;
  lane.kind = kBlobLane;
  lane.nrails = 3;  // a lane blob carries none, whatever the struct holds
  ASSERT_EQ(decodeBlob(encodeBlob(lane), &out, &why), Status::Ok) << why;
  EXPECT_EQ(out.nrails, 0);
}

TEST(TcpRails, MalformedRailsAreRefused) {
  Blob b = answerWith({v4("10.1.0.2", 4000)});
  std::vector<uint8_t> raw = encodeBlob(b);
  const size_t railsAt = raw.size() - (1 + 1 + 2 + 16 + 1);  // nrails, one rail (family, port, address), flags
  Blob out;
  std::string why;
  auto refused = [&](std::vector<uint8_t> bad, const char* what) {
    EXPECT_NE(decodeBlob(bad, &out, &why), Status::Ok) << what;
    EXPECT_FALSE(why.empty()) << what;
  };
  std::vector<uint8_t> many = raw;
  many[railsAt] = kMaxRails + 1;
  refused(many, "more rails than kMaxRails");
  std::vector<uint8_t> family = raw;
  family[railsAt + 1] = 5;
  refused(family, "unknown family");
  std::vector<uint8_t> port = raw;
  port[railsAt + 2] = port[railsAt + 3] = 0;
  refused(port, "port 0");
  std::vector<uint8_t> shortBlob(raw.begin(), raw.end() - 2);
  refused(shortBlob, "truncated rail");
  std::vector<uint8_t> noFlags(raw.begin(), raw.end() - 1);
  refused(noFlags, "no flags byte");
  std::vector<uint8_t> flags = raw;
  flags[railsAt + 20] = 2;  // the flags byte, after the rail
  refused(flags, "a flag this version does not know");
  std::vector<uint8_t> longer = raw;
  longer.push_back(0);
  refused(longer, "trailing byte");
  std::vector<uint8_t> claimsTwo = raw;
  claimsTwo[railsAt] = 2;
  refused(claimsTwo, "count larger than the rails sent");
}

// An acceptor's offer to take lane 0's copy travels in its control answer; the copy's own blob names lane 0 only.
TEST(TcpRails, LaneZeroCopyBlobs) {
  Blob answer = answerWith({v4("10.1.0.2", 4000)});
  answer.flags = kBlobFlagMirror;
  Blob out;
  std::string why;
  ASSERT_EQ(decodeBlob(encodeBlob(answer), &out, &why), Status::Ok) << why;
  EXPECT_EQ(out.flags, kBlobFlagMirror);
  Blob copy;
  copy.kind = kBlobLane0Copy;
  ASSERT_EQ(decodeBlob(encodeBlob(copy), &out, &why), Status::Ok) << why;
  EXPECT_EQ(out.kind, kBlobLane0Copy);
  copy.value = 1;
  EXPECT_NE(decodeBlob(encodeBlob(copy), &out, &why), Status::Ok) << "a copy of a lane other than lane 0";
}

TEST(TcpRails, PairsRailsBySubnetAndSkipsUnreachableOnes) {
  const std::vector<Rail> local = {rail("eth0", "10.1.0.1", 24), rail("eth1", "10.2.0.1", 24),
                                   rail("eth2", "10.3.0.1", 24)};
  const SockAddr handle = v4("10.1.0.2", 5000);
  // The peer's rails: its handshake interface again, one on our eth2's subnet, one nobody here reaches on-link.
  const Blob answer = answerWith({v4("10.1.0.2", 5001), v4("10.3.0.2", 5002), v4("192.168.7.2", 5003)});
  const std::vector<RailPath> paths = pairRails(local, handle, answer);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0].ifname, "eth0");
  EXPECT_FALSE(paths[0].bindSource);
  EXPECT_EQ(paths[0].dest.str(), "10.1.0.2:5000");
  EXPECT_EQ(paths[1].ifname, "eth2");
  EXPECT_TRUE(paths[1].bindSource);
  EXPECT_EQ(paths[1].source.str(), "10.3.0.1:0");
  EXPECT_EQ(paths[1].dest.str(), "10.3.0.2:5002");
}

TEST(TcpRails, OneLocalRailServesOnePeerRail) {
  const std::vector<Rail> local = {rail("eth0", "10.1.0.1", 24), rail("eth1", "10.2.0.1", 16)};
  const Blob answer = answerWith({v4("10.2.0.2", 6001), v4("10.2.9.2", 6002)});
  const std::vector<RailPath> paths = pairRails(local, v4("10.1.0.2", 6000), answer);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[1].dest.str(), "10.2.0.2:6001");
}

TEST(TcpRails, LanesTakeThePathsInTurn) {
  EXPECT_EQ(pathOfLane(0, 2), 0u);  // lane 0 stays on the handshake's path
  EXPECT_EQ(pathOfLane(1, 2), 0u);
  EXPECT_EQ(pathOfLane(2, 2), 1u);
  EXPECT_EQ(pathOfLane(3, 2), 0u);
  EXPECT_EQ(pathOfLane(4, 1), 0u);
  EXPECT_EQ(describeLanes({"eth0 -> 10.1.0.2", "eth1 -> 10.2.0.2"}, {0, 0, 1, 0, 1}),
            "eth0 -> 10.1.0.2 (lanes 0,1,3), eth1 -> 10.2.0.2 (lanes 2,4)");
}

TEST(TcpRails, SubnetsCompareOnlyThePrefix) {
  EXPECT_TRUE(sameSubnet(v4("10.2.3.4"), v4("10.2.3.200"), 24));
  EXPECT_FALSE(sameSubnet(v4("10.2.3.4"), v4("10.2.4.4"), 24));
  EXPECT_TRUE(sameSubnet(v4("10.2.4.4"), v4("10.2.7.9"), 22));
  EXPECT_FALSE(sameSubnet(v4("10.2.3.4"), v4("10.2.4.4"), 22));
  EXPECT_FALSE(sameSubnet(v4("10.2.3.4"), v4("10.2.3.5"), 0));  // no subnet known: nothing is on-link
  EXPECT_TRUE(sameHost(v4("10.2.3.4", 1), v4("10.2.3.4", 2)));
}

TEST(TcpRails, FailoverHeadersAreCheckedFieldByField) {
  std::string why;
  ChunkHeader down;
  down.flags = kChunkLaneDown;
  down.slot = 2;
  EXPECT_TRUE(validChunk(down, 0, &why)) << why;
  ChunkHeader bad = down;
  bad.length = 8;  // a lane-down carries nothing
  EXPECT_FALSE(validChunk(bad, 0, &why));
  bad = down;
  bad.slot = 0;  // lane 0 cannot be given up
  EXPECT_FALSE(validChunk(bad, 0, &why));
  bad = down;
  bad.slot = kMaxLanes + 1;
  EXPECT_FALSE(validChunk(bad, 0, &why));
  ChunkHeader offer;
  offer.flags = kChunkLaneOffer;
  offer.slot = 1;
  offer.offset = 40000;  // the port
  EXPECT_TRUE(validChunk(offer, 0, &why)) << why;
  bad = offer;
  bad.offset = 0;
  EXPECT_FALSE(validChunk(bad, 0, &why));
  bad = offer;
  bad.offset = 65536;
  EXPECT_FALSE(validChunk(bad, 0, &why));
  bad = offer;
  bad.tag = 3;
  EXPECT_FALSE(validChunk(bad, 0, &why));
  ChunkHeader resend;
  resend.flags = kChunkResend;
  resend.total = 100;
  resend.offset = 40;
  resend.length = 60;
  EXPECT_TRUE(validChunk(resend, 0, &why)) << why;
  bad = resend;
  bad.length = 61;  // past its message, as for any piece
  EXPECT_FALSE(validChunk(bad, 0, &why));
  bad = resend;
  bad.flags = kChunkResend | kChunkLaneDown;  // one kind at a time
  EXPECT_FALSE(validChunk(bad, 0, &why));
  bad = resend;
  bad.flags = 16;  // unknown
  EXPECT_FALSE(validChunk(bad, 0, &why));
}

// A rail's rate is the acknowledged bytes over the kernel's busy time of the lane socket (tcpBusy): the time it
// sits idle between messages must not count, or a rail that carries a message now and then reads as slow.
TEST(TcpBusy, CountsAcknowledgedBytesAndNotIdleTime) {
  Fd sender, receiver;
  testwire::loopbackTcpPair(&sender, &receiver);
  ASSERT_FALSE(HasFatalFailure());
  pollfd w{sender.get(), POLLOUT, 0};

  TcpBusy before;
  if (!tcpBusy(sender.get(), &before)) GTEST_SKIP() << "this kernel's TCP_INFO has no busy time (Linux < 4.10)";
  constexpr size_t kBytes = 8u << 20;
  // A reader that takes 64 KiB a millisecond keeps the sender busy for over 100 ms: the kernel counts busy time in
  // jiffies (1-10 ms), so a shorter transfer may count none.
  std::thread reader([&] {
    std::vector<char> buf(1 << 16);
    size_t got = 0;
    while (got < kBytes) {
      ssize_t r = ::recv(receiver.get(), buf.data(), buf.size(), 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<char> data(1 << 16, 'x');
  size_t sent = 0;
  while (sent < kBytes) {
    ssize_t r = ::send(sender.get(), data.data(), std::min(data.size(), kBytes - sent), MSG_NOSIGNAL);
    if (r > 0) {
      sent += static_cast<size_t>(r);
    } else if (errno == EAGAIN) {
      poll(&w, 1, 1000);
    } else {
      FAIL() << "send: " << strerror(errno);
    }
  }
  reader.join();
  TcpBusy done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    ASSERT_TRUE(tcpBusy(sender.get(), &done));
  } while (done.bytesAcked - before.bytesAcked < kBytes && std::chrono::steady_clock::now() < deadline);
  EXPECT_GE(done.bytesAcked - before.bytesAcked, kBytes);
  EXPECT_GE(done.busyUs - before.busyUs, 50000u) << "the transfer's busy time was not counted";

  // Idle for 200 ms: nothing acknowledged, and (all acknowledged) no busy time either, to a jiffy or two.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  TcpBusy idle;
  ASSERT_TRUE(tcpBusy(sender.get(), &idle));
  EXPECT_EQ(idle.bytesAcked, done.bytesAcked);
  EXPECT_LT(idle.busyUs - done.busyUs, 20000u) << "idle time counted as busy";
}

}  // namespace
}  // namespace icn::tcp
