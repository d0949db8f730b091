// Wire codec edge cases: every truncation of a valid HELLO is refused with a reason, lengths are
// bounded, and the listen handle parser refuses anything it did not write.
#include <gtest/gtest.h>

#include <functional>

#include <random>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/oob.h"

namespace icn {
namespace {

Hello sample() {
  Hello h;
  h.transport = kTransportUcx;
  h.commId = 0x1122334455667788ull;
  h.rank = 3;
  h.pid = 4242;
  h.host = "node-17";
  for (int i = 0; i < 16; i++) h.nonce[i] = static_cast<uint8_t>(i * 11);
  h.mac.assign(32, 0x5a);
  h.blob = {1, 2, 3, 4, 5, 6, 7};
  return h;
}

TEST(Codec, HelloRoundTrip) {
  Hello in = sample(), out;
  std::string why;
  ASSERT_EQ(decodeHello(encodeHello(in), &out, &why), Status::Ok) << why;
  EXPECT_EQ(out.transport, in.transport);
  EXPECT_EQ(out.commId, in.commId);
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.pid, in.pid);
  EXPECT_EQ(out.host, in.host);
  EXPECT_EQ(0, memcmp(out.nonce, in.nonce, 16));
  EXPECT_EQ(out.mac, in.mac);
  EXPECT_EQ(out.blob, in.blob);
}

TEST(Codec, EveryTruncationRefusedWithReason) {
  auto bytes = encodeHello(sample());
  for (size_t n = 0; n < bytes.size(); n++) {
    Hello out;
    std::string why;
    EXPECT_EQ(decodeHello(std::span<const uint8_t>(bytes.data(), n), &out, &why), Status::RemoteError) << n;
    EXPECT_FALSE(why.empty()) << "no reason for a " << n << "-byte HELLO";
  }
}

TEST(Codec, FieldLimits) {
  Hello h = sample(), out;
  std::string why;
  h.host.assign(256, 'h');  // the decoder caps host names at 255 bytes
  EXPECT_EQ(decodeHello(encodeHello(h), &out, &why), Status::RemoteError);
  EXPECT_NE(why.find("host name"), std::string::npos);
  h = sample();
  h.mac.assign(16, 1);  // only 0 or 32
  EXPECT_EQ(decodeHello(encodeHello(h), &out, &why), Status::RemoteError);
  EXPECT_NE(why.find("authentication"), std::string::npos);
  h = sample();
  h.transport = 7;
  EXPECT_EQ(decodeHello(encodeHello(h), &out, &why), Status::RemoteError);
  EXPECT_NE(why.find("transport id 7"), std::string::npos);
  auto bytes = encodeHello(sample());
  bytes[bytes.size() - 8] = 0xFF;  // blob length (u32) far beyond the frame
  EXPECT_EQ(decodeHello(bytes, &out, &why), Status::RemoteError);
}

TEST(Codec, FrameHeader) {
  auto hdr = [](uint32_t magic, uint16_t ver, uint16_t type, uint32_t len) {
    std::array<uint8_t, 12> h;
    auto f = encodeFrame(FrameType::Hello, {});
    memcpy(h.data(), f.data(), 12);
    memcpy(h.data(), &magic, 4);  // little-endian host: the wire order
    memcpy(h.data() + 4, &ver, 2);
    memcpy(h.data() + 6, &type, 2);
    memcpy(h.data() + 8, &len, 4);
    return h;
  };
  FrameType t;
  uint32_t len = 0;
  std::string why;
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion, 1, kMaxFramePayload), &t, &len, &why), Status::Ok);
  EXPECT_EQ(len, kMaxFramePayload);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion, 2, 0), &t, &len, &why), Status::Ok);
  EXPECT_EQ(t, FrameType::Ready);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion, 1, kMaxFramePayload + 1), &t, &len, &why),
            Status::RemoteError);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic ^ 1, kWireVersion, 1, 0), &t, &len, &why), Status::RemoteError);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion + 1, 1, 0), &t, &len, &why), Status::RemoteError);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion, 0, 0), &t, &len, &why), Status::RemoteError);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion, 3, 16), &t, &len, &why), Status::Ok);
  EXPECT_EQ(t, FrameType::Challenge);
  EXPECT_EQ(decodeFrameHeader(hdr(kWireMagic, kWireVersion, 4, 0), &t, &len, &why), Status::RemoteError);
}

// A host name reaches the logs: printable ASCII only (no escape sequences, no forged log lines).
TEST(Codec, HostNameMustBePrintable) {
  for (const char* bad : {"a\nb", "esc\x1b[2J", "nul\x01", "space here", "del\x7f", "hi\xc3\xa9"}) {
    Hello h = sample(), out;
    std::string why;
    h.host = bad;
    EXPECT_EQ(decodeHello(encodeHello(h), &out, &why), Status::RemoteError) << bad;
    EXPECT_NE(why.find("non-printable"), std::string::npos) << why;
  }
}

// The digest behind every tag covers each field of a HELLO except the tag itself.
TEST(Codec, HelloDigestCoversEveryFieldButTheTag) {
  const Hello base = sample();
  const Digest d = helloDigest(base);
  Hello h = base;
  h.mac.assign(32, 0x77);
  EXPECT_EQ(helloDigest(h), d);
  std::vector<std::function<void(Hello&)>> changes = {
      [](Hello& x) { x.transport = 2; }, [](Hello& x) { x.commId ^= 1; }, [](Hello& x) { x.rank ^= 1; },
      [](Hello& x) { x.pid ^= 1; },      [](Hello& x) { x.host += "x"; }, [](Hello& x) { x.nonce[15] ^= 1; },
      [](Hello& x) { x.blob.push_back(0); }};
  for (size_t i = 0; i < changes.size(); i++) {
    h = base;
    changes[i](h);
    EXPECT_NE(helloDigest(h), d) << "change " << i << " is not covered";
  }
  EXPECT_EQ(proofMessage('C', std::vector<uint8_t>{1}, std::vector<uint8_t>{2}),
            (std::vector<uint8_t>{'I', 'C', 'N', '2', 'C', 1, 2}));
}

TEST(ListenHandle, RoundTripAndRefusals) {
  std::array<uint8_t, kHandleSize> h{};
  SockAddr a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(4321);
  in->sin_addr.s_addr = htonl(0x0a000001);
  a.len = sizeof(sockaddr_in);
  ASSERT_EQ(writeListenHandle(h, kTransportUcx, a), Status::Ok);
  SockAddr b;
  std::string why;
  ASSERT_EQ(readListenHandle(h, kTransportUcx, &b, &why), Status::Ok) << why;
  EXPECT_EQ(b.str(), "10.0.0.1:4321");
  EXPECT_EQ(readListenHandle(h, kTransportIb, &b, &why), Status::InvalidArgument);
  EXPECT_NE(why.find("ICN_TRANSPORT"), std::string::npos);
  auto bad = h;
  bad[6] = 99;  // address length
  EXPECT_EQ(readListenHandle(bad, kTransportUcx, &b, &why), Status::InvalidArgument);
  bad = h;
  bad[8] = AF_UNIX;  // sockaddr family
  bad[9] = 0;
  EXPECT_EQ(readListenHandle(bad, kTransportUcx, &b, &why), Status::InvalidArgument);
  std::array<uint8_t, kHandleSize> zeros{};
  EXPECT_EQ(readListenHandle(zeros, kTransportUcx, &b, &why), Status::InvalidArgument);
  std::mt19937 rng(9);
  int accepted = 0;
  for (int i = 0; i < 10000; i++) {
    std::array<uint8_t, kHandleSize> junk;
    for (auto& x : junk) x = static_cast<uint8_t>(rng());
    accepted += readListenHandle(junk, kTransportUcx, &b, &why) == Status::Ok;
  }
  EXPECT_EQ(accepted, 0) << "random handles must fail the magic check";
}

}  // namespace
}  // namespace icn
