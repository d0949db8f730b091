#include <gtest/gtest.h>

#include "core/handshake.h"
#include "core/oob.h"

using namespace icn;

namespace {
Hello sample() {
  Hello h;
  h.transport = 1;
  h.commId = 0x1122334455667788ULL;
  h.rank = 3;
  h.pid = 4242;
  h.host = "node-7";
  for (int i = 0; i < 16; i++) h.nonce[i] = static_cast<uint8_t>(i);
  h.blob = {1, 2, 3, 4, 5};
  return h;
}
}  // namespace

TEST(HandshakeCodec, HelloRoundTrip) {
  Hello h = sample();
  std::vector<uint8_t> wire = encodeHello(h);
  Hello back;
  std::string why;
  ASSERT_EQ(decodeHello(wire, &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.commId, h.commId);
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.pid, 4242u);
  EXPECT_EQ(back.host, "node-7");
  EXPECT_EQ(back.blob, h.blob);
  EXPECT_TRUE(back.mac.empty());
}

TEST(HandshakeCodec, RejectsEveryTruncation) {
  std::vector<uint8_t> wire = encodeHello(sample());
  for (size_t n = 0; n < wire.size(); n++) {
    Hello back;
    std::string why;
    EXPECT_NE(decodeHello(std::span<const uint8_t>(wire.data(), n), &back, &why), Status::Ok) << "length " << n;
    EXPECT_FALSE(why.empty());
  }
  wire.push_back(0);  // trailing garbage
  Hello back;
  std::string why;
  EXPECT_NE(decodeHello(wire, &back, &why), Status::Ok);
}

TEST(HandshakeCodec, FrameHeaderChecks) {
  auto frame = encodeFrame(FrameType::Hello, std::vector<uint8_t>(10));
  FrameType t;
  uint32_t len;
  std::string why;
  ASSERT_EQ(decodeFrameHeader(std::span<const uint8_t, 12>(frame.data(), 12), &t, &len, &why), Status::Ok);
  EXPECT_EQ(len, 10u);
  auto bad = frame;
  bad[0] ^= 0xff;
  EXPECT_NE(decodeFrameHeader(std::span<const uint8_t, 12>(bad.data(), 12), &t, &len, &why), Status::Ok);
  EXPECT_NE(why.find("magic"), std::string::npos);
  bad = frame;
  bad[4] = 99;  // version
  EXPECT_NE(decodeFrameHeader(std::span<const uint8_t, 12>(bad.data(), 12), &t, &len, &why), Status::Ok);
  bad = frame;
  bad[11] = 0x7f;  // 2 GB payload
  EXPECT_NE(decodeFrameHeader(std::span<const uint8_t, 12>(bad.data(), 12), &t, &len, &why), Status::Ok);
  EXPECT_NE(why.find("limit"), std::string::npos);
}

TEST(HandshakeCodec, ListenHandleRoundTripAndTransportMismatch) {
  uint8_t raw[kHandleSize] = {};
  SockAddr a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(1234);
  in->sin_addr.s_addr = htonl(0x7f000001);
  a.len = sizeof(sockaddr_in);
  HandleBytes h(raw, kHandleSize);
  ASSERT_EQ(writeListenHandle(h, kTransportUcx, a), Status::Ok);
  SockAddr back;
  std::string why;
  ASSERT_EQ(readListenHandle(h, kTransportUcx, &back, &why), Status::Ok) << why;
  EXPECT_EQ(back.str(), "127.0.0.1:1234");
  EXPECT_EQ(readListenHandle(h, kTransportIb, &back, &why), Status::InvalidArgument);
  EXPECT_NE(why.find("ICN_TRANSPORT"), std::string::npos);
  uint8_t zeros[kHandleSize] = {};
  EXPECT_EQ(readListenHandle(HandleBytes(zeros, kHandleSize), kTransportUcx, &back, &why), Status::InvalidArgument);
}

TEST(HandshakeCodec, PendingRegistryOnlyTrustsParkedPointers) {
  uint8_t raw[kHandleSize];
  memset(raw, 0xab, sizeof raw);  // a garbage pointer in the scratch area
  HandleBytes h(raw, kHandleSize);
  EXPECT_EQ(takePending<int>(h), nullptr);
  int value = 5;
  parkPending(h, &value);
  EXPECT_EQ(takePending<int>(h), &value);
  EXPECT_EQ(takePending<int>(h), nullptr) << "taken twice";
}
