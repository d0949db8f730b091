// The handshake state machine against a scripted peer: malformed frames, truncation, stalls and every
// authentication mismatch must end in a logged refusal (never a hang, never a completed handshake).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <optional>
#include <random>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/oob.h"
#include "log_capture.h"
#include "raw_peer.h"

namespace icn {
namespace {

using testing::RawPeer;
using testing::rawHeader;
using testing::setEnvAndReload;
using testing::takeWarnings;
using testing::warned;
using Phase = Handshake::Phase;

constexpr const char* kKey = "job-key-0123456789";

class HandshakeTest : public ::testing::Test {
 public:
  void SetUp() override {
    testing::installLogCapture();
    setEnvAndReload("ICN_AUTH_KEY", nullptr);
    setEnvAndReload("ICN_AUTH_KEY_FILE", nullptr);
    setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", "3000");
    takeWarnings();
  }
  void TearDown() override {
    setEnvAndReload("ICN_AUTH_KEY", nullptr);
    setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", nullptr);
  }
  // Real handshake on one end of a socketpair, the scripted peer on the other.
  void make(Handshake::Role role) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    Hello local = makeLocalHello(kTransportUcx, 77, role == Handshake::Role::Connector ? std::vector<uint8_t>{1, 2, 3}
                                                                                      : std::vector<uint8_t>{});
    hs = std::make_unique<Handshake>(Fd(sv[0]), role, "scripted-peer", std::move(local));
    raw = std::make_unique<RawPeer>(sv[1]);
  }
  // Progresses until `want` (confirming at PeerKnown when asked), an error, or the limit.
  Status drive(Phase want, bool confirmAtPeerKnown = true, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      Phase p;
      Status st = hs->progress(&p);
      if (st != Status::Ok) return st;
      if (p == want) return Status::Ok;
      if (p == Phase::PeerKnown && confirmAtPeerKnown && !confirmed) {
        hs->confirm({9, 9});
        confirmed = true;
      }
      usleep(500);
    }
    return Status::InternalError;  // neither done nor failed: a hang
  }
  void pumpOnce() {
    Phase p;
    if (hs->progress(&p) == Status::Ok && p == Phase::PeerKnown && !confirmed) {
      hs->confirm({9, 9});
      confirmed = true;
    }
  }
  // A connector HELLO with a correct tag for this process's key setting (or an explicit tag).
  Hello validHello(std::optional<std::vector<uint8_t>> tag = std::nullopt) {
    Hello h = makeLocalHello(kTransportUcx, 77, {0xAB, 0xCD});
    h.host = "scripted";
    const uint8_t zero[16] = {};
    h.mac = tag ? *tag : auth::helloTag('H', h.nonce, zero, h.blob);
    return h;
  }
  // Tag as a peer holding `key` (empty: no key, plain SHA-256) would compute it.
  static std::vector<uint8_t> tagWith(const std::string& key, char role, const uint8_t* nC, const uint8_t* nA,
                                      std::span<const uint8_t> blob) {
    uint8_t msg[65];
    msg[0] = static_cast<uint8_t>(role);
    memcpy(msg + 1, nC, 16);
    memcpy(msg + 17, nA, 16);
    Digest b = sha256(blob);
    memcpy(msg + 33, b.data(), 32);
    Digest d = key.empty() ? sha256(msg) : hmacSha256({reinterpret_cast<const uint8_t*>(key.data()), key.size()}, msg);
    return {d.begin(), d.end()};
  }
  Hello helloTaggedWith(const std::string& key) {
    Hello h = validHello();
    const uint8_t zero[16] = {};
    h.mac = tagWith(key, 'H', h.nonce, zero, h.blob);
    return h;
  }
  std::vector<uint8_t> helloFrame(const Hello& h) { return encodeFrame(FrameType::Hello, encodeHello(h)); }
  std::vector<uint8_t> readyFrame(std::span<const uint8_t> mac) {
    std::vector<uint8_t> p{static_cast<uint8_t>(mac.size())};
    p.insert(p.end(), mac.begin(), mac.end());
    return encodeFrame(FrameType::Ready, p);
  }
  static std::vector<uint8_t> macWith(const std::string& key, char role, const uint8_t* nC, const uint8_t* nA) {
    uint8_t msg[33];
    msg[0] = static_cast<uint8_t>(role);
    memcpy(msg + 1, nC, 16);
    memcpy(msg + 17, nA, 16);
    Digest d = hmacSha256({reinterpret_cast<const uint8_t*>(key.data()), key.size()}, msg);
    return {d.begin(), d.end()};
  }
  // Acceptor side: sends `bytes` (then optionally closes) and expects a refusal whose WARN contains `why`.
  void expectAcceptorRefuses(std::vector<uint8_t> bytes, const char* why, bool closeAfter = false) {
    make(Handshake::Role::Acceptor);
    ASSERT_TRUE(raw->send(bytes));
    if (closeAfter) raw->close();
    EXPECT_EQ(drive(Phase::Done), Status::RemoteError) << "expected refusal: " << why;
    auto w = takeWarnings();
    EXPECT_TRUE(warned(w, {"scripted-peer", why})) << "no WARN naming the peer and saying: " << why;
  }

  std::unique_ptr<Handshake> hs;
  std::unique_ptr<RawPeer> raw;
  bool confirmed = false;
};

TEST_F(HandshakeTest, WrongMagicRefused) { expectAcceptorRefuses(rawHeader(0x47455420, 1, 1, 10), "bad magic"); }
TEST_F(HandshakeTest, HttpRequestRefused) {
  std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  expectAcceptorRefuses({get.begin(), get.end()}, "bad magic");
}
TEST_F(HandshakeTest, WrongVersionRefused) { expectAcceptorRefuses(rawHeader(kWireMagic, 2, 1, 10), "protocol version 2"); }
TEST_F(HandshakeTest, UnknownFrameTypeRefused) {
  expectAcceptorRefuses(rawHeader(kWireMagic, kWireVersion, 9, 0), "unknown frame type 9");
}
TEST_F(HandshakeTest, OversizedLengthRefused) {
  expectAcceptorRefuses(rawHeader(kWireMagic, kWireVersion, 1, 0xFFFFFFF0u), "exceeds");
  expectAcceptorRefuses(rawHeader(kWireMagic, kWireVersion, 1, kMaxFramePayload + 1), "exceeds");
}
TEST_F(HandshakeTest, TruncatedHeaderThenCloseRefused) {
  expectAcceptorRefuses({0x31, 0x4e, 0x43, 0x49, 1}, "closed the connection during the handshake", true);
}
TEST_F(HandshakeTest, TruncatedHelloThenCloseRefused) {
  auto f = helloFrame(validHello());
  f.resize(f.size() - 5);
  expectAcceptorRefuses(f, "closed the connection during the handshake", true);
}
TEST_F(HandshakeTest, HelloWithInconsistentLengthsRefused) {
  auto payload = encodeHello(validHello());
  payload.push_back(0);  // one byte more than the fields describe
  expectAcceptorRefuses(encodeFrame(FrameType::Hello, payload), "does not match the frame");
}
TEST_F(HandshakeTest, WrongTransportRefused) {
  Hello h = validHello();
  h.transport = kTransportIb;
  expectAcceptorRefuses(helloFrame(h), "uses transport ib");
}
TEST_F(HandshakeTest, ReadyBeforeHelloRefused) { expectAcceptorRefuses(readyFrame({}), "unexpected READY"); }
TEST_F(HandshakeTest, HelloWithoutTagRefused) {
  expectAcceptorRefuses(helloFrame(validHello(std::vector<uint8_t>{})), "fails its integrity check");
}
TEST_F(HandshakeTest, HelloWithWrongTagRefused) {
  expectAcceptorRefuses(helloFrame(validHello(std::vector<uint8_t>(32, 1))), "fails its integrity check");
}
// A HELLO whose transport payload was altered after tagging never reaches the transport's parser.
TEST_F(HandshakeTest, HelloWithCorruptBlobRefused) {
  Hello h = validHello();
  h.blob[0] ^= 0x40;
  expectAcceptorRefuses(helloFrame(h), "fails its integrity check");
}
TEST_F(HandshakeTest, SecondHelloRefused) {
  auto f = helloFrame(validHello());
  auto twice = f;
  twice.insert(twice.end(), f.begin(), f.end());
  expectAcceptorRefuses(twice, "unexpected second HELLO");
}
TEST_F(HandshakeTest, RandomBytesRefused) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 20; i++) {
    std::vector<uint8_t> junk(1 + rng() % 3000);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    confirmed = false;
    expectAcceptorRefuses(junk, "handshake with scripted-peer failed", true);
  }
}
TEST_F(HandshakeTest, StalledPeerTimesOut) {
  setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", "300");
  make(Handshake::Role::Acceptor);
  EXPECT_EQ(drive(Phase::Done), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"scripted-peer", "no progress for 300 ms"}));
}
TEST_F(HandshakeTest, PeerStallingAfterHelloTimesOut) {
  setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", "300");
  make(Handshake::Role::Acceptor);
  ASSERT_TRUE(raw->send(helloFrame(validHello())));
  EXPECT_EQ(drive(Phase::Done), Status::RemoteError);  // never sends READY
  EXPECT_TRUE(warned(takeWarnings(), {"no progress for 300 ms after HELLO"}));
}

// ---- authentication -------------------------------------------------------------------------------

// Both real ends in one process (same key, or no key at all): the handshake completes.
void runRealPair(bool* ok) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  Handshake c(Fd(sv[0]), Handshake::Role::Connector, "acceptor", makeLocalHello(kTransportUcx, 5, {1}));
  Handshake a(Fd(sv[1]), Handshake::Role::Acceptor, "connector", makeLocalHello(kTransportUcx, 5, {}));
  bool cConfirmed = false, aConfirmed = false, cDone = false, aDone = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(cDone && aDone) && std::chrono::steady_clock::now() < deadline) {
    Phase p;
    if (!cDone) {
      ASSERT_EQ(c.progress(&p), Status::Ok);
      if (p == Phase::PeerKnown && !cConfirmed) c.confirm(), cConfirmed = true;
      cDone = p == Phase::Done;
    }
    if (!aDone) {
      ASSERT_EQ(a.progress(&p), Status::Ok);
      if (p == Phase::PeerKnown && !aConfirmed) a.confirm({2}), aConfirmed = true;
      aDone = p == Phase::Done;
    }
  }
  ASSERT_TRUE(cDone && aDone) << "handshake did not finish";
  EXPECT_EQ(c.peer().blob, std::vector<uint8_t>{2});
  EXPECT_EQ(a.peer().blob, std::vector<uint8_t>{1});
  *ok = true;
}

TEST_F(HandshakeTest, NoKeyCompletes) {
  bool ok = false;
  runRealPair(&ok);
  EXPECT_TRUE(ok);
}

TEST_F(HandshakeTest, SameKeyCompletes) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  ASSERT_TRUE(auth::enabled());
  bool ok = false;
  runRealPair(&ok);
  EXPECT_TRUE(ok);
}

// Plays the connector by hand: HELLO tagged with `helloKey`, then a READY whose MAC `readyMac` picks.
// Returns the acceptor's result; *acceptorHello gets its HELLO when it sent one.
template <typename MacFn>
Status acceptorAgainst(HandshakeTest* t, const std::string& helloKey, MacFn readyMac, std::optional<Hello>* acceptorHello) {
  t->make(Handshake::Role::Acceptor);
  Hello ch = t->helloTaggedWith(helloKey);
  EXPECT_TRUE(t->raw->send(t->helloFrame(ch)));
  auto reply = t->raw->readFrame([&] { t->pumpOnce(); });
  if (!reply) return t->drive(Phase::Done);  // refused at HELLO: it must say so
  Hello ah;
  std::string why;
  EXPECT_EQ(decodeHello(reply->payload, &ah, &why), Status::Ok) << why;
  *acceptorHello = ah;
  EXPECT_TRUE(t->raw->send(t->readyFrame(readyMac(ch.nonce, ah.nonce))));
  return t->drive(Phase::Done);
}

auto readyWith(const std::string& key, char role = 'C') {
  return [key, role](const uint8_t* nC, const uint8_t* nA) {
    return key.empty() ? std::vector<uint8_t>{} : HandshakeTest::macWith(key, role, nC, nA);
  };
}

TEST_F(HandshakeTest, KeyedAcceptorAcceptsCorrectPeerAndProvesItself) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(kKey), &ah), Status::Ok);
  ASSERT_TRUE(ah.has_value());
  EXPECT_EQ(ah->mac.size(), 32u);
}

TEST_F(HandshakeTest, KeyedAcceptorProofMatchesIndependentHmac) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  make(Handshake::Role::Acceptor);
  Hello ch = helloTaggedWith(kKey);
  ASSERT_TRUE(raw->send(helloFrame(ch)));
  auto reply = raw->readFrame([&] { pumpOnce(); });
  ASSERT_TRUE(reply.has_value());
  Hello ah;
  std::string why;
  ASSERT_EQ(decodeHello(reply->payload, &ah, &why), Status::Ok) << why;
  EXPECT_EQ(ah.mac, tagWith(kKey, 'A', ch.nonce, ah.nonce, ah.blob));
  EXPECT_NE(ah.mac, tagWith("", 'A', ch.nonce, ah.nonce, ah.blob));
}

TEST_F(HandshakeTest, KeyedAcceptorRefusesHelloWithWrongKeyBeforeReplying) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, "another-jobs-key", readyWith(kKey), &ah), Status::RemoteError);
  EXPECT_FALSE(ah.has_value()) << "the acceptor answered (and set up) before the peer proved the key";
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
}

TEST_F(HandshakeTest, KeyedAcceptorRefusesUnkeyedPeer) {  // key on the acceptor only
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, "", readyWith(""), &ah), Status::RemoteError);
  EXPECT_FALSE(ah.has_value());
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
}

TEST_F(HandshakeTest, KeyedAcceptorRefusesBadReady) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith("another-jobs-key"), &ah), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
  confirmed = false;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(""), &ah), Status::RemoteError);  // no proof at all
  confirmed = false;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(kKey, 'A'), &ah), Status::RemoteError);  // reflected role
  confirmed = false;
  uint8_t oldNonce[16] = {7};
  auto replay = [&](const uint8_t* nC, const uint8_t*) { return macWith(kKey, 'C', nC, oldNonce); };
  EXPECT_EQ(acceptorAgainst(this, kKey, replay, &ah), Status::RemoteError);  // proof from another session
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
}

TEST_F(HandshakeTest, UnkeyedAcceptorRefusesKeyedPeer) {  // key on the connector only
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(kKey), &ah), Status::RemoteError);
  EXPECT_FALSE(ah.has_value());
  EXPECT_TRUE(warned(takeWarnings(), {"ICN_AUTH_KEY is set there but not here"}));
}

TEST_F(HandshakeTest, UnkeyedAcceptorRefusesMacInReady) {
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, "", readyWith(kKey), &ah), Status::RemoteError);
  ASSERT_TRUE(ah.has_value());
  EXPECT_TRUE(warned(takeWarnings(), {"requires authentication but ICN_AUTH_KEY is not set here"}));
}

// Connector side: the scripted acceptor answers with a HELLO tagged with `key` (empty: plain SHA-256).
Status connectorAgainst(HandshakeTest* t, const std::string& key, bool corruptBlob = false) {
  t->make(Handshake::Role::Connector);
  auto hello = t->raw->readFrame([&] { t->pumpOnce(); });
  EXPECT_TRUE(hello.has_value());
  if (!hello) return Status::InternalError;
  Hello ch;
  std::string why;
  EXPECT_EQ(decodeHello(hello->payload, &ch, &why), Status::Ok) << why;
  Hello ah = t->validHello();
  ah.mac = HandshakeTest::tagWith(key, 'A', ch.nonce, ah.nonce, ah.blob);
  if (corruptBlob) ah.blob[1] ^= 1;
  EXPECT_TRUE(t->raw->send(t->helloFrame(ah)));
  return t->drive(Phase::Done);
}

TEST_F(HandshakeTest, KeyedConnectorChecksAcceptor) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  EXPECT_EQ(connectorAgainst(this, kKey), Status::Ok);
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, "wrong key"), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, ""), Status::RemoteError);  // key on the connector only
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, kKey, true), Status::RemoteError);  // blob altered in flight
}

TEST_F(HandshakeTest, UnkeyedConnectorChecksAcceptor) {
  EXPECT_EQ(connectorAgainst(this, ""), Status::Ok);
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, kKey), Status::RemoteError);  // key on the acceptor only
  EXPECT_TRUE(warned(takeWarnings(), {"ICN_AUTH_KEY is set there but not here"}));
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, "", true), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"fails its integrity check"}));
}

}  // namespace
}  // namespace icn
