// Known-answer tests for the handshake's crypto: FIPS 180-2 SHA-256 examples (plus every padding
// boundary around one and two blocks) and the RFC 4231 HMAC-SHA256 test cases 1-7.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/auth.h"

namespace icn {
namespace {

std::string hex(std::span<const uint8_t> d) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += k[b >> 4];
    s += k[b & 15];
  }
  return s;
}

std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(hex(sha256(bytes(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256(bytes("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256(bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(bytes("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnop"
                             "qrsmnopqrstnopqrstu"))),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(hex(sha256(bytes(std::string(1000000, 'a')))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths where the length field does / does not fit in the last block (reference: Python hashlib).
TEST(Sha256, PaddingBoundaries) {
  const std::pair<size_t, const char*> cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
  };
  for (auto& [n, want] : cases) {
    std::vector<uint8_t> m(n);
    for (size_t i = 0; i < n; i++) m[i] = static_cast<uint8_t>(i * 7 + 3);
    EXPECT_EQ(hex(sha256(m)), want) << "length " << n;
  }
}

struct HmacCase {
  std::vector<uint8_t> key;
  std::string data;
  const char* mac;
  size_t truncate = 32;
};

std::vector<uint8_t> rep(uint8_t b, size_t n) { return std::vector<uint8_t>(n, b); }

TEST(HmacSha256, Rfc4231) {
  std::vector<uint8_t> k4;
  for (uint8_t i = 1; i <= 25; i++) k4.push_back(i);
  const HmacCase cases[] = {
      {rep(0x0b, 20), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {{'J', 'e', 'f', 'e'}, "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {rep(0xaa, 20), std::string(50, '\xdd'), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {k4, std::string(50, '\xcd'), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {rep(0x0c, 20), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b", 16},
      {rep(0xaa, 131), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {rep(0xaa, 131),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
       "hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  int n = 1;
  for (auto& c : cases) {
    Digest d = hmacSha256(c.key, bytes(c.data));
    EXPECT_EQ(hex(std::span<const uint8_t>(d.data(), c.truncate)), c.mac) << "RFC 4231 test case " << n;
    n++;
  }
}

// A key of exactly one block (64 bytes) is used as is, one byte more is hashed first: both paths differ.
TEST(HmacSha256, BlockSizedKeysDiffer) {
  Digest a = hmacSha256(rep(0x42, 64), bytes("m"));
  Digest b = hmacSha256(rep(0x42, 65), bytes("m"));
  Digest c = hmacSha256(rep(0x42, 63), bytes("m"));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  // A key longer than a block is equivalent to its SHA-256 digest (RFC 2104).
  Digest kd = sha256(rep(0x42, 65));
  EXPECT_EQ(hmacSha256(kd, bytes("m")), b);
}

}  // namespace
}  // namespace icn
