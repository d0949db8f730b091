// The handshake state machine against a scripted peer: malformed frames, truncation, stalls and every
// authentication mismatch must end in a logged refusal (never a hang, never a completed handshake).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
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
  // A real connector taken (unkeyed) through a scripted acceptor's CHALLENGE and HELLO to PeerKnown, unconfirmed.
  void connectorUpToTheAcceptorsHello() {
    make(Handshake::Role::Connector);
    std::array<uint8_t, 16> nonceA{9, 8, 7, 6, 5};
    ASSERT_TRUE(raw->send(encodeFrame(FrameType::Challenge, nonceA)));
    auto hello = raw->readFrame([&] { pumpOnce(); });
    ASSERT_TRUE(hello.has_value());
    Hello ch;
    std::string why;
    ASSERT_EQ(decodeHello(hello->payload, &ch, &why), Status::Ok) << why;
    Hello ah = makeLocalHello(kTransportUcx, 77, {0xAB, 0xCD});
    ah.host = "scripted";
    memcpy(ah.nonce, nonceA.data(), 16);
    ah.mac = tagWith("", 'A', helloDigest(ch), helloDigest(ah));
    ASSERT_TRUE(raw->send(helloFrame(ah)));
    EXPECT_EQ(drive(Phase::PeerKnown, false), Status::Ok);
  }
  // A real acceptor that has answered a scripted connector's HELLO (ch) with its own (ah), before READY.
  void acceptorUpToItsHello(Hello* ch, Hello* ah) {
    make(Handshake::Role::Acceptor);
    *ch = helloFor(challenge(), "");
    ASSERT_TRUE(raw->send(helloFrame(*ch)));
    auto reply = raw->readFrame([&] { pumpOnce(); });
    ASSERT_TRUE(reply.has_value()) << "no HELLO from the acceptor";
    std::string err;
    ASSERT_EQ(decodeHello(reply->payload, ah, &err), Status::Ok) << err;
  }
  void pumpOnce() {
    Phase p;
    if (hs->progress(&p) == Status::Ok && p == Phase::PeerKnown && !confirmed) {
      hs->confirm({9, 9});
      confirmed = true;
    }
  }
  // Reads the acceptor's CHALLENGE (the real acceptor sends it first).
  std::array<uint8_t, 16> challenge() {
    std::array<uint8_t, 16> n{};
    auto f = raw->readFrame([&] { pumpOnce(); });
    EXPECT_TRUE(f.has_value()) << "no CHALLENGE";
    if (f) {
      EXPECT_EQ(f->type, uint16_t(FrameType::Challenge));
      EXPECT_EQ(f->payload.size(), 16u);
      if (f->payload.size() == 16) memcpy(n.data(), f->payload.data(), 16);
    }
    return n;
  }
  // The tag a peer holding `key` (empty: no key, plain SHA-256) computes over proofMessage(kind, first, second).
  static std::vector<uint8_t> tagWith(const std::string& key, char kind, std::span<const uint8_t> first,
                                      std::span<const uint8_t> second) {
    std::vector<uint8_t> msg = proofMessage(kind, first, second);
    Digest d = key.empty() ? sha256(msg) : hmacSha256({reinterpret_cast<const uint8_t*>(key.data()), key.size()}, msg);
    return {d.begin(), d.end()};
  }
  // A connector HELLO, tagged for `nonceA` as a peer holding `key` would (or with an explicit tag).
  Hello helloFor(const std::array<uint8_t, 16>& nonceA, const std::string& key,
                 std::optional<std::vector<uint8_t>> tag = std::nullopt) {
    Hello h = makeLocalHello(kTransportUcx, 77, {0xAB, 0xCD});
    h.host = "scripted";
    h.mac = tag ? *tag : tagWith(key, 'C', nonceA, helloDigest(h));
    return h;
  }
  // With this process's key setting.
  std::string ownKey() const { return auth::enabled() ? kKey : ""; }
  std::vector<uint8_t> helloFrame(const Hello& h) { return encodeFrame(FrameType::Hello, encodeHello(h)); }
  std::vector<uint8_t> readyFrame(std::span<const uint8_t> mac) {
    std::vector<uint8_t> p{static_cast<uint8_t>(mac.size())};
    p.insert(p.end(), mac.begin(), mac.end());
    return encodeFrame(FrameType::Ready, p);
  }
  // Acceptor side: reads the CHALLENGE, sends what `craft` makes of it (then optionally closes) and expects a
  // refusal whose WARN contains `why`.
  template <typename Craft>
  void expectAcceptorRefusesAfterChallenge(Craft craft, const char* why, bool closeAfter = false) {
    make(Handshake::Role::Acceptor);
    auto nonceA = challenge();
    ASSERT_TRUE(raw->send(craft(nonceA)));
    if (closeAfter) raw->close();
    EXPECT_EQ(drive(Phase::Done), Status::RemoteError) << "expected refusal: " << why;
    auto w = takeWarnings();
    EXPECT_TRUE(warned(w, {"scripted-peer", why})) << "no WARN naming the peer and saying: " << why;
  }
  void expectAcceptorRefuses(std::vector<uint8_t> bytes, const char* why, bool closeAfter = false) {
    expectAcceptorRefusesAfterChallenge([&](const auto&) { return bytes; }, why, closeAfter);
  }

  std::unique_ptr<Handshake> hs;
  std::unique_ptr<RawPeer> raw;
  bool confirmed = false;
};

TEST_F(HandshakeTest, WrongMagicRefused) { expectAcceptorRefuses(rawHeader(0x47455420, 2, 1, 10), "bad magic"); }
TEST_F(HandshakeTest, HttpRequestRefused) {
  std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  expectAcceptorRefuses({get.begin(), get.end()}, "bad magic");
}
TEST_F(HandshakeTest, WrongVersionRefused) { expectAcceptorRefuses(rawHeader(kWireMagic, 1, 1, 10), "protocol version 1"); }
TEST_F(HandshakeTest, UnknownFrameTypeRefused) {
  expectAcceptorRefuses(rawHeader(kWireMagic, kWireVersion, 9, 0), "unknown frame type 9");
}
TEST_F(HandshakeTest, OversizedLengthRefused) {
  expectAcceptorRefuses(rawHeader(kWireMagic, kWireVersion, 1, 0xFFFFFFF0u), "exceeds");
  expectAcceptorRefuses(rawHeader(kWireMagic, kWireVersion, 1, kMaxFramePayload + 1), "exceeds");
}
TEST_F(HandshakeTest, TruncatedHeaderThenCloseRefused) {
  expectAcceptorRefuses({0x31, 0x4e, 0x43, 0x49, 2}, "closed the connection during the handshake", true);
}
TEST_F(HandshakeTest, TruncatedHelloThenCloseRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) {
    auto f = helloFrame(helloFor(n, ""));
    f.resize(f.size() - 5);
    return f;
  }, "closed the connection during the handshake", true);
}
TEST_F(HandshakeTest, HelloWithInconsistentLengthsRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) {
    auto payload = encodeHello(helloFor(n, ""));
    payload.push_back(0);  // one byte more than the fields describe
    return encodeFrame(FrameType::Hello, payload);
  }, "does not match the frame");
}
TEST_F(HandshakeTest, WrongTransportRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) {
    Hello h = helloFor(n, "");
    h.transport = kTransportIb;
    return helloFrame(h);
  }, "uses transport ib");
}
TEST_F(HandshakeTest, ReadyBeforeHelloRefused) { expectAcceptorRefuses(readyFrame({}), "unexpected READY"); }
TEST_F(HandshakeTest, ChallengeFromConnectorRefused) {
  expectAcceptorRefuses(encodeFrame(FrameType::Challenge, std::vector<uint8_t>(16, 1)), "unexpected CHALLENGE");
}
TEST_F(HandshakeTest, HelloWithoutTagRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) { return helloFrame(helloFor(n, "", std::vector<uint8_t>{})); },
                                      "fails its integrity check");
}
TEST_F(HandshakeTest, HelloWithWrongTagRefused) {
  expectAcceptorRefusesAfterChallenge(
      [&](const auto& n) { return helloFrame(helloFor(n, "", std::vector<uint8_t>(32, 1))); },
      "fails its integrity check");
}
// A HELLO whose transport payload was altered after tagging never reaches the transport's parser.
TEST_F(HandshakeTest, HelloWithCorruptBlobRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) {
    Hello h = helloFor(n, "");
    h.blob[0] ^= 0x40;
    return helloFrame(h);
  }, "fails its integrity check");
}
// A HELLO tagged for another connection's challenge (captured, replayed) fails.
TEST_F(HandshakeTest, HelloForAnotherChallengeRefused) {
  expectAcceptorRefusesAfterChallenge([&](auto n) {
    n[0] ^= 1;
    return helloFrame(helloFor(n, ""));
  }, "fails its integrity check");
}
TEST_F(HandshakeTest, HelloForAnotherCommunicatorRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) {
    Hello h = makeLocalHello(kTransportUcx, 78, {1});
    h.mac = tagWith("", 'C', n, helloDigest(h));
    return helloFrame(h);
  }, "belongs to communicator 0x4e, this listener serves 0x4d");
}
TEST_F(HandshakeTest, SecondHelloRefused) {
  expectAcceptorRefusesAfterChallenge([&](const auto& n) {
    auto f = helloFrame(helloFor(n, ""));
    auto twice = f;
    twice.insert(twice.end(), f.begin(), f.end());
    return twice;
  }, "bytes after its HELLO, before ours, where the protocol allows none");
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
TEST_F(HandshakeTest, StalledPeerHitsTheDeadline) {
  setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", "300");
  make(Handshake::Role::Acceptor);
  EXPECT_EQ(drive(Phase::Done), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"scripted-peer", "not completed within 300 ms", "the connector's HELLO"}));
}
TEST_F(HandshakeTest, PeerStallingAfterHelloHitsTheDeadline) {
  setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", "300");
  make(Handshake::Role::Acceptor);
  ASSERT_TRUE(raw->send(helloFrame(helloFor(challenge(), ""))));
  EXPECT_EQ(drive(Phase::Done), Status::RemoteError);  // never sends READY
  EXPECT_TRUE(warned(takeWarnings(), {"not completed within 300 ms", "waiting for READY"}));
}
// Bytes that keep arriving do not extend the deadline.
TEST_F(HandshakeTest, TricklingPeerHitsTheAbsoluteDeadline) {
  setEnvAndReload("ICN_CONNECT_TIMEOUT_MS", "300");
  make(Handshake::Role::Acceptor);
  auto frame = helloFrame(helloFor(challenge(), ""));
  auto start = std::chrono::steady_clock::now();
  Status st = Status::Ok;
  for (size_t i = 0; i < frame.size() && st == Status::Ok; i++) {
    raw->send({&frame[i], 1});
    for (int k = 0; k < 20 && st == Status::Ok; k++) {
      Phase p;
      st = hs->progress(&p);
      usleep(500);
    }
  }
  EXPECT_EQ(st, Status::RemoteError) << "a trickling peer kept the handshake alive";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_TRUE(warned(takeWarnings(), {"not completed within 300 ms"}));
}
TEST_F(HandshakeTest, NoRandomnessNoHandshake) {
  auth::failRandomForTesting(true);
  Hello h = makeLocalHello(kTransportUcx, 77, {});
  auth::failRandomForTesting(false);
  EXPECT_FALSE(h.fresh);
  EXPECT_EQ(h.nonce[0] | h.nonce[7] | h.nonce[15], 0);
  EXPECT_TRUE(warned(takeWarnings(), {"no random bytes for a handshake nonce"}));
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  Handshake a(Fd(sv[0]), Handshake::Role::Acceptor, "scripted-peer", h);
  RawPeer peer(sv[1]);
  Phase p;
  EXPECT_EQ(a.progress(&p), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"scripted-peer", "no fresh nonce"}));
  uint8_t b;
  EXPECT_LE(::recv(sv[1], &b, 1, MSG_DONTWAIT), 0) << "a CHALLENGE went out with a predictable nonce";
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

// Plays the connector by hand: reads the CHALLENGE, sends a HELLO tagged with `helloKey`, then a READY whose tag
// `readyTag` makes from (D(HELLO_C), D(HELLO_A)). Returns the acceptor's result; *acceptorHello gets its HELLO.
template <typename TagFn>
Status acceptorAgainst(HandshakeTest* t, const std::string& helloKey, TagFn readyTag,
                       std::optional<Hello>* acceptorHello) {
  t->make(Handshake::Role::Acceptor);
  auto nonceA = t->challenge();
  Hello ch = t->helloFor(nonceA, helloKey);
  EXPECT_TRUE(t->raw->send(t->helloFrame(ch)));
  auto reply = t->raw->readFrame([&] { t->pumpOnce(); });
  if (!reply) return t->drive(Phase::Done);  // refused at HELLO: it must say so
  Hello ah;
  std::string why;
  EXPECT_EQ(decodeHello(reply->payload, &ah, &why), Status::Ok) << why;
  *acceptorHello = ah;
  EXPECT_TRUE(t->raw->send(t->readyFrame(readyTag(helloDigest(ch), helloDigest(ah)))));
  return t->drive(Phase::Done);
}

auto readyWith(const std::string& key, char kind = 'R') {
  return [key, kind](const Digest& dC, const Digest& dA) { return HandshakeTest::tagWith(key, kind, dC, dA); };
}

TEST_F(HandshakeTest, KeyedAcceptorAcceptsCorrectPeerAndProvesItself) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(kKey), &ah), Status::Ok);
  ASSERT_TRUE(ah.has_value());
  EXPECT_EQ(ah->mac.size(), 32u);
}

// The acceptor's tag is the documented HMAC over both HELLOs, and its HELLO carries the nonce it challenged with.
TEST_F(HandshakeTest, KeyedAcceptorProofMatchesIndependentHmac) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  make(Handshake::Role::Acceptor);
  auto nonceA = challenge();
  Hello ch = helloFor(nonceA, kKey);
  ASSERT_TRUE(raw->send(helloFrame(ch)));
  auto reply = raw->readFrame([&] { pumpOnce(); });
  ASSERT_TRUE(reply.has_value());
  Hello ah;
  std::string why;
  ASSERT_EQ(decodeHello(reply->payload, &ah, &why), Status::Ok) << why;
  EXPECT_EQ(0, memcmp(ah.nonce, nonceA.data(), 16));
  EXPECT_EQ(ah.commId, 77u);
  EXPECT_EQ(ah.mac, tagWith(kKey, 'A', helloDigest(ch), helloDigest(ah)));
  EXPECT_NE(ah.mac, tagWith("", 'A', helloDigest(ch), helloDigest(ah)));
}

TEST_F(HandshakeTest, KeyedAcceptorRefusesHelloWithWrongKeyBeforeReplying) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, "another-jobs-key-0123456789", readyWith(kKey), &ah), Status::RemoteError);
  EXPECT_FALSE(ah.has_value()) << "the acceptor answered (and set up) before the peer proved the key";
  EXPECT_FALSE(confirmed) << "the acceptor reached PeerKnown for a peer without the key";
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
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith("another-jobs-key-0123456789"), &ah), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
  confirmed = false;
  EXPECT_EQ(acceptorAgainst(this, kKey, [](const Digest&, const Digest&) { return std::vector<uint8_t>{}; }, &ah),
            Status::RemoteError);  // no proof at all
  confirmed = false;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(kKey, 'A'), &ah), Status::RemoteError);  // reflected kind
  confirmed = false;
  Digest other{};
  auto replay = [&](const Digest& dC, const Digest&) { return tagWith(kKey, 'R', dC, other); };
  EXPECT_EQ(acceptorAgainst(this, kKey, replay, &ah), Status::RemoteError);  // proof from another session
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
}

TEST_F(HandshakeTest, UnkeyedAcceptorRefusesKeyedPeer) {  // key on the connector only
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, kKey, readyWith(kKey), &ah), Status::RemoteError);
  EXPECT_FALSE(ah.has_value());
  EXPECT_TRUE(warned(takeWarnings(), {"ICN_AUTH_KEY is set there but not here"}));
}

TEST_F(HandshakeTest, UnkeyedAcceptorChecksReadyIntegrity) {
  std::optional<Hello> ah;
  EXPECT_EQ(acceptorAgainst(this, "", readyWith(""), &ah), Status::Ok);
  confirmed = false;
  EXPECT_EQ(acceptorAgainst(this, "", readyWith(kKey), &ah), Status::RemoteError);
  ASSERT_TRUE(ah.has_value());
  EXPECT_TRUE(warned(takeWarnings(), {"READY from scripted:", "fails its integrity check"}));
}

// Connector side: the scripted acceptor challenges, then answers with a HELLO tagged with `key` (empty: plain
// SHA-256); `mutate` may spoil it.
template <typename Mutate>
Status connectorAgainst(HandshakeTest* t, const std::string& key, Mutate mutate) {
  t->make(Handshake::Role::Connector);
  std::array<uint8_t, 16> nonceA{9, 8, 7, 6, 5};
  EXPECT_TRUE(t->raw->send(encodeFrame(FrameType::Challenge, nonceA)));
  auto hello = t->raw->readFrame([&] { t->pumpOnce(); });
  EXPECT_TRUE(hello.has_value());
  if (!hello) return Status::InternalError;
  Hello ch;
  std::string why;
  EXPECT_EQ(decodeHello(hello->payload, &ch, &why), Status::Ok) << why;
  EXPECT_EQ(ch.mac, HandshakeTest::tagWith(t->ownKey(), 'C', nonceA, helloDigest(ch)));
  Hello ah = makeLocalHello(kTransportUcx, 77, {0xAB, 0xCD});
  ah.host = "scripted";
  memcpy(ah.nonce, nonceA.data(), 16);
  ah.mac = HandshakeTest::tagWith(key, 'A', helloDigest(ch), helloDigest(ah));
  mutate(ah);
  EXPECT_TRUE(t->raw->send(t->helloFrame(ah)));
  return t->drive(Phase::Done);
}
Status connectorAgainst(HandshakeTest* t, const std::string& key) {
  return connectorAgainst(t, key, [](Hello&) {});
}

TEST_F(HandshakeTest, KeyedConnectorChecksAcceptor) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  EXPECT_EQ(connectorAgainst(this, kKey), Status::Ok);
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, "wrong key 0123456789"), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, ""), Status::RemoteError);  // key on the connector only
  EXPECT_TRUE(warned(takeWarnings(), {"did not prove knowledge of the job key"}));
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, kKey, [](Hello& h) { h.blob[1] ^= 1; }), Status::RemoteError);  // altered
  confirmed = false;
  // An acceptor HELLO that does not answer our challenge (replayed from another connection).
  EXPECT_EQ(connectorAgainst(this, kKey, [](Hello& h) { h.nonce[0] ^= 1; }), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"does not carry the nonce of its CHALLENGE"}));
}

TEST_F(HandshakeTest, UnkeyedConnectorChecksAcceptor) {
  EXPECT_EQ(connectorAgainst(this, ""), Status::Ok);
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, kKey), Status::RemoteError);  // key on the acceptor only
  EXPECT_TRUE(warned(takeWarnings(), {"ICN_AUTH_KEY is set there but not here"}));
  confirmed = false;
  EXPECT_EQ(connectorAgainst(this, "", [](Hello& h) { h.blob[1] ^= 1; }), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"fails its integrity check"}));
}

// The peer may send nothing between its HELLO and ours, and a second HELLO after ours is refused as such: no byte a
// peer sends before our part is over waits unparsed.
TEST_F(HandshakeTest, AcceptorRefusesBytesWhereTheProtocolAllowsNone) {
  Hello ch, ah;
  acceptorUpToItsHello(&ch, &ah);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(raw->send(helloFrame(ch)));
  EXPECT_EQ(drive(Phase::Done), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"scripted:", "unexpected second HELLO"}));
  confirmed = false;
  // Before its HELLO is answered (the transport has not confirmed it yet), the peer has nothing to say.
  make(Handshake::Role::Acceptor);
  ASSERT_TRUE(raw->send(helloFrame(helloFor(challenge(), ""))));
  EXPECT_EQ(drive(Phase::PeerKnown, false), Status::Ok);
  ASSERT_TRUE(raw->send(std::vector<uint8_t>(3000, 0x55)));
  EXPECT_EQ(drive(Phase::Done, false), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"scripted:", "bytes after its HELLO, before ours, where the protocol allows none"}));
}

// READY ends the connector's part: what it sends next (in the same segment here) is its stream, left on the socket
// for the transport, not read by the handshake.
TEST_F(HandshakeTest, AcceptorLeavesTheStreamAfterReady) {
  Hello ch, ah;
  acceptorUpToItsHello(&ch, &ah);
  if (HasFatalFailure()) return;
  auto f = readyFrame(tagWith("", 'R', helloDigest(ch), helloDigest(ah)));
  const std::vector<uint8_t> stream{0xF7, 0x01, 0x02};
  f.insert(f.end(), stream.begin(), stream.end());
  ASSERT_TRUE(raw->send(f));
  ASSERT_EQ(drive(Phase::Done), Status::Ok);
  Fd fd = hs->takeFd();
  std::vector<uint8_t> got(16);
  ASSERT_EQ(::recv(fd.get(), got.data(), got.size(), MSG_DONTWAIT), 3) << "the stream's bytes were read by the handshake";
  got.resize(3);
  EXPECT_EQ(got, stream);
}

// The acceptor says nothing after its HELLO: a byte after it fails the connector, confirmed or not.
TEST_F(HandshakeTest, ConnectorRefusesBytesAfterTheAcceptorsHello) {
  connectorUpToTheAcceptorsHello();  // proven, our transport still setting up
  if (HasFatalFailure()) return;
  ASSERT_TRUE(raw->send(std::vector<uint8_t>(10, 0)));
  EXPECT_EQ(drive(Phase::Done, false), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"scripted:", "10 bytes after its HELLO, where the protocol allows none"}));
}

// Once the connector's READY is out its part is over: the acceptor's stream may follow at once, and is left on the
// socket for the transport (a read after READY would take it into the handshake's buffer).
TEST_F(HandshakeTest, ConnectorLeavesTheStreamAfterReady) {
  connectorUpToTheAcceptorsHello();
  if (HasFatalFailure()) return;
  hs->confirm();
  // The acceptor's stream arrives before the connector's next call: that call sends READY and is done.
  const std::vector<uint8_t> stream(100, 0x5A);
  ASSERT_TRUE(raw->send(stream));
  usleep(20000);
  Phase p = Phase::InProgress;
  ASSERT_EQ(hs->progress(&p), Status::Ok);
  ASSERT_EQ(p, Phase::Done);
  auto ready = raw->readFrame([] {});
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->type, uint16_t(FrameType::Ready));
  Fd fd = hs->takeFd();
  std::vector<uint8_t> got(200);
  ASSERT_EQ(::recv(fd.get(), got.data(), got.size(), MSG_DONTWAIT), 100) << "the stream's bytes were read by the handshake";
  got.resize(100);
  EXPECT_EQ(got, stream);
}

// The connector sends nothing before the acceptor's challenge, and only one HELLO after it.
TEST_F(HandshakeTest, ConnectorWaitsForTheChallenge) {
  make(Handshake::Role::Connector);
  for (int i = 0; i < 20; i++) pumpOnce();
  uint8_t b;
  EXPECT_LT(::recv(raw->fd(), &b, 1, MSG_DONTWAIT), 0) << "the connector spoke before the CHALLENGE";
  EXPECT_TRUE(raw->send(encodeFrame(FrameType::Hello, encodeHello(makeLocalHello(kTransportUcx, 77, {1})))));
  EXPECT_EQ(drive(Phase::Done), Status::RemoteError);
  EXPECT_TRUE(warned(takeWarnings(), {"unexpected HELLO before the CHALLENGE"}));
}

}  // namespace
}  // namespace icn
