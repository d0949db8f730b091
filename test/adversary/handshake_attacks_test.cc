// Hostile peers on the handshake: replayed and rewritten HELLOs, a HELLO for another communicator, log
// injection through the host name, one-byte-at-a-time handshakes, a flood of idle connections, oversized
// lengths, frames out of order, junk. Each case: the victim neither crashes nor fails accept(), refuses the
// hostile connection with a WARN naming the peer and the cause, and accepts the honest rank meanwhile.
#include <gtest/gtest.h>

#include <random>

#include "core/auth.h"
#include "core/oob.h"
#include "core/wire.h"
#include "victim.h"

namespace icn::adversary {
namespace {

constexpr const char* kKey = "adversary-suite-job-key-0123456789";
constexpr Ms kRefusedWithin{5000};

// One connection: read the challenge, send what `craft` makes of a valid HELLO, expect the listener to close.
template <typename Craft>
void sendCrafted(const SockAddr& to, const std::string& key, Craft craft, const char* what) {
  WirePeer p(to);
  ASSERT_TRUE(p.ok()) << what;
  auto nonceA = p.readChallenge();
  ASSERT_TRUE(nonceA.has_value()) << what << ": no CHALLENGE from the listener";
  Hello h = connectorHello(kCommId, junkBlob());
  tagConnectorHello(&h, *nonceA, key);
  std::vector<uint8_t> bytes = craft(h, *nonceA);
  p.send(bytes);
  EXPECT_TRUE(p.closedByListener(kRefusedWithin)) << what << ": the listener kept the connection";
}

class Keyed : public ::testing::TestWithParam<bool> {
 public:
  std::string key() const { return GetParam() ? kKey : ""; }
  std::vector<std::pair<std::string, std::string>> env() const {
    if (!GetParam()) return {};
    return {{"ICN_AUTH_KEY", kKey}};
  }
  // The refusal a bad tag earns, with and without a key.
  const char* tagRefusal() const { return GetParam() ? "did not prove knowledge of the job key" : "fails its integrity check"; }
};

// A HELLO captured from one connection (here: made and sent by a rank that holds the key, as an honest rank
// would) and replayed on another fails there: its tag covers the first connection's challenge.
TEST_P(Keyed, ReplayedHelloIsRefused) {
  std::string key = this->key();
  auto out = runAttack(
      [key](const SockAddr& to, const VictimInfo&) {
        WirePeer first(to);
        ASSERT_TRUE(first.ok());
        auto nonceA = first.readChallenge();
        ASSERT_TRUE(nonceA.has_value());
        Hello h = connectorHello(kCommId, junkBlob());
        tagConnectorHello(&h, *nonceA, key);
        std::vector<uint8_t> captured = helloFrame(h);
        WirePeer replay(to);
        ASSERT_TRUE(replay.ok());
        ASSERT_TRUE(replay.readChallenge().has_value());
        replay.send(captured);
        EXPECT_TRUE(replay.closedByListener(kRefusedWithin)) << "a replayed HELLO was not refused";
      },
      1, [](VictimReport&) {}, env());
  EXPECT_EQ(out.victimWarnCount({"handshake with ", "rogue-peer:", tagRefusal()}), 1u);
}

// Every identity field of a tagged HELLO, rewritten after tagging, breaks the tag.
TEST_P(Keyed, RewrittenHelloIsRefused) {
  std::string key = this->key();
  auto out = runAttack(
      [key](const SockAddr& to, const VictimInfo&) {
        using H = Hello;
        const std::vector<std::pair<const char*, std::function<void(H&)>>> rewrites = {
            {"host", [](H& h) { h.host = "trusted-host"; }},
            {"pid", [](H& h) { h.pid ^= 1; }},
            {"rank", [](H& h) { h.rank = 0; }},
            {"commId", [](H& h) { h.commId ^= 0x10000; }},
            {"nonce", [](H& h) { h.nonce[3] ^= 1; }},
            {"blob", [](H& h) { h.blob.back() ^= 1; }},
        };
        for (auto& [what, rewrite] : rewrites)
          sendCrafted(to, key, [&](Hello h, const Nonce&) {
            rewrite(h);
            return helloFrame(h);
          }, what);
      },
      1, [](VictimReport&) {}, env());
  // One refusal at the tag per rewritten field: a field the tag does not cover would fail later, or not at all.
  EXPECT_EQ(out.victimWarnCount({"handshake with ", "trusted-host", tagRefusal()}), 1u);
  EXPECT_EQ(out.victimWarnCount({"handshake with ", "rogue-peer:", tagRefusal()}), 5u);
}

// A correctly tagged HELLO made for another communicator is refused by the commId check.
TEST_P(Keyed, HelloForAnotherCommunicatorIsRefused) {
  std::string key = this->key();
  auto out = runAttack(
      [key](const SockAddr& to, const VictimInfo&) {
        sendCrafted(to, key, [&](Hello h, const Nonce& nonceA) {
          h.commId = kCommId + 1;
          tagConnectorHello(&h, nonceA, key);
          return helloFrame(h);
        }, "other communicator");
      },
      1, [](VictimReport&) {}, env());
  EXPECT_TRUE(out.victimWarns({"rogue-peer:", "belongs to communicator 0x1235, this listener serves 0x1234"}));
}

INSTANTIATE_TEST_SUITE_P(Adversary, Keyed, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "WithKey" : "NoKey"); });

// A host name with control characters never reaches the log (it could forge log lines or terminal escapes).
TEST(Adversary, HostNameWithControlCharactersIsRefused) {
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        sendCrafted(to, "", [](Hello h, const Nonce& nonceA) {
          h.host = "evil\x1b[2J\nNCCL WARN forged";
          tagConnectorHello(&h, nonceA, "");
          return helloFrame(h);
        }, "control characters");
      },
      1, [](VictimReport&) {});
  EXPECT_TRUE(out.victimWarns({"handshake with ", "non-printable byte 0x1b"}));
  EXPECT_FALSE(out[0].logHas("evil")) << "the hostile host name reached the log";
}

// A peer that keeps the handshake alive one byte at a time is cut at the absolute deadline, not after the
// last byte: progress does not extend ICN_CONNECT_TIMEOUT_MS.
TEST(Adversary, TrickledHandshakeHitsTheAbsoluteDeadline) {
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        WirePeer p(to);
        ASSERT_TRUE(p.ok());
        auto nonceA = p.readChallenge();
        ASSERT_TRUE(nonceA.has_value());
        Hello h = connectorHello(kCommId, std::vector<uint8_t>(400, 0xEE));
        tagConnectorHello(&h, *nonceA, "");
        std::vector<uint8_t> bytes = helloFrame(h);
        auto start = std::chrono::steady_clock::now();
        size_t sent = p.trickle(bytes, Ms(20));  // ~10 s for all of it, one byte every 20 ms
        auto took = std::chrono::steady_clock::now() - start;
        EXPECT_LT(sent, bytes.size()) << "the listener let a trickling peer finish its HELLO";
        EXPECT_TRUE(p.closedByListener(Ms(2000)));
        EXPECT_GT(took, Ms(1500)) << "closed before the deadline";
        EXPECT_LT(took, Ms(5000)) << "not closed at the 2 s deadline";
      },
      1, [](VictimReport&) {}, {{"ICN_CONNECT_TIMEOUT_MS", "2000"}});
  EXPECT_TRUE(out.victimWarns({"handshake with ", "not completed within 2000 ms",
                              "waiting for the connector's HELLO"}));
}

// More idle connections than the listener's set-up budget holds: the oldest are dropped at once (long before the
// deadline), with a WARN, and the honest rank still connects.
TEST(Adversary, FloodOfIdleConnectionsDropsTheOldest) {
  const size_t budget = setupBudget(kSmallSetupCap);
  auto out = runAttack(
      [budget](const SockAddr& to, const VictimInfo&) {
        std::vector<std::unique_ptr<WirePeer>> idle;
        for (size_t i = 0; i < budget + 40; i++) {
          idle.push_back(std::make_unique<WirePeer>(to));
          ASSERT_TRUE(idle.back()->ok()) << "connection " << i;
        }
        size_t closed = 0;
        for (auto& p : idle) closed += p->closedByListener(Ms(closed < 40 ? 3000 : 0));
        EXPECT_GE(closed, 40u) << "the listener kept more than its budget of set-up sockets";
        EXPECT_TRUE(idle.front()->closedByListener(Ms(0))) << "the oldest idle connection was not the one dropped";
        // The remaining idle ones stay open while the honest rank connects (attackerBody's next step).
        static std::vector<std::unique_ptr<WirePeer>> keep;
        keep = std::move(idle);
      },
      1, [](VictimReport&) {}, withSmallSetupCap({{"ICN_CONNECT_TIMEOUT_MS", "20000"}}));
  EXPECT_TRUE(out.victimWarns({"over the " + std::to_string(budget) + " that ICN_LISTEN_MAX_SETUPS=",
                               "dropping the oldest set-up of"}));
}

// Oversized lengths, frames out of order and junk: refused one by one, each with its reason.
TEST(Adversary, OversizedOutOfOrderAndJunkFramesAreRefused) {
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        std::mt19937 rng(7);
        auto junk = [&](size_t n) {
          std::vector<uint8_t> v(n);
          for (auto& b : v) b = uint8_t(rng());
          return v;
        };
        auto header = [](uint16_t type, uint32_t len) {
          WireWriter w;
          w.put(kWireMagic), w.put(kWireVersion), w.put(type), w.put(len);
          return std::move(w.buffer());
        };
        const std::vector<std::pair<const char*, std::function<std::vector<uint8_t>(Hello, const Nonce&)>>> cases = {
            {"2 GiB frame", [&](Hello, const Nonce&) { return header(1, 0x80000000u); }},
            {"HELLO whose blob length exceeds the frame",
             [&](Hello h, const Nonce&) {
               auto p = encodeHello(h);
               p[p.size() - h.blob.size() - 1] = 0x7f;  // top byte of the u32 blob length
               return encodeFrame(FrameType::Hello, p);
             }},
            {"host length over 255",
             [&](Hello h, const Nonce& n) {
               h.host.assign(300, 'h');
               return helloFrame(h);
             }},
            {"CHALLENGE sent by the connector",
             [&](Hello, const Nonce& n) { return encodeFrame(FrameType::Challenge, n); }},
            {"READY before HELLO", [&](Hello, const Nonce&) { return encodeFrame(FrameType::Ready, junk(33)); }},
            {"two HELLOs (nothing may follow the first before the listener answers it)",
             [&](Hello h, const Nonce& n) {
               h.blob = acceptableBlob();  // the first one passes
               tagConnectorHello(&h, n, "");
               auto f = helloFrame(h);
               auto twice = f;
               twice.insert(twice.end(), f.begin(), f.end());
               return twice;
             }},
            {"junk", [&](Hello, const Nonce&) { return junk(3000); }},
            {"frame of the previous wire version",
             [&](Hello h, const Nonce&) {
               auto f = helloFrame(h);
               f[4] = 1;
               return f;
             }},
        };
        for (auto& [what, craft] : cases) sendCrafted(to, "", craft, what);
      },
      1, [](VictimReport&) {});
  for (const char* why : {"exceeds the 65536-byte limit", "transport payload length does not match the frame",
                          "bad host name field", "unexpected CHALLENGE frame", "unexpected READY frame",
                          "bytes after its HELLO, before ours", "bad magic", "protocol version 1, we speak 2"})
    EXPECT_TRUE(out.victimWarns({"handshake with ", why})) << "no WARN saying: " << why;
}

// A peer that passes its HELLO and then sends a READY without a valid tag is refused; what the victim built
// for it is released, and nothing else is affected.
TEST(Adversary, ForgedReadyIsRefused) {
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        WirePeer p(to);
        ASSERT_TRUE(p.ok());
        auto nonceA = p.readChallenge();
        ASSERT_TRUE(nonceA.has_value());
        Hello h = connectorHello(kCommId, acceptableBlob());
        tagConnectorHello(&h, *nonceA, "");
        ASSERT_TRUE(p.send(helloFrame(h)));
        auto reply = p.readFrame();
        ASSERT_TRUE(reply.has_value()) << "no HELLO from the victim after a valid HELLO";
        EXPECT_EQ(reply->type, uint16_t(FrameType::Hello));
        std::vector<uint8_t> ready{32};
        ready.resize(33, 0x11);
        p.send(encodeFrame(FrameType::Ready, ready));
        EXPECT_TRUE(p.closedByListener(kRefusedWithin));
      },
      1, [](VictimReport&) {});
  EXPECT_TRUE(out.victimWarns({"rogue-peer:", "READY from rogue-peer:", "fails its integrity check"}));
}


// UCX's parser trusts a worker address (no length, assertions that abort the process on malformed input), so
// the address in a HELLO is safe to hand to UCX only from a peer that proved the job key. With a key, junk,
// truncated and bit-flipped addresses from a peer without it never reach UCX: each is refused at its tag.
// (Without a key such a peer can abort the rank through UCX; the README's threat model says so.)
TEST(AdversaryUcx, CorruptWorkerAddressesNeverReachUcxWithoutTheKey) {
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        std::vector<uint8_t> real = UcxRogue::realWorkerAddress();
        ASSERT_FALSE(real.empty());
        std::mt19937 rng(11);
        std::vector<std::vector<uint8_t>> addrs;
        addrs.push_back(std::vector<uint8_t>(64, 0xEE));
        std::vector<uint8_t> random(300);
        for (auto& b : random) b = uint8_t(rng());
        addrs.push_back(random);
        addrs.push_back(std::vector<uint8_t>(real.begin(), real.begin() + long(real.size() / 2)));
        for (size_t k = 0; k < 6; k++) {  // 9 addresses in all
          auto flipped = real;
          flipped[k * real.size() / 6] ^= 0xFF;
          addrs.push_back(flipped);
        }
        int n = 0;
        for (auto& a : addrs) {
          const char* key = n++ % 2 ? "" : "a-different-jobs-key-0123456789";
          sendCrafted(to, key, [&](Hello h, const Nonce& nonceA) {
            h.blob = ucxBlob(a);
            tagConnectorHello(&h, nonceA, key);
            return helloFrame(h);
          }, "corrupt worker address");
        }
      },
      1, [](VictimReport&) {}, {{"ICN_TRANSPORT", "ucx"}, {"ICN_AUTH_KEY", kKey}});
  EXPECT_EQ(out.victimWarnCount({"rogue-peer:", "did not prove knowledge of the job key"}), 9u)
      << "each corrupt address is refused at its tag";
  EXPECT_FALSE(out[0].logHas("Assertion")) << "UCX parsed an unauthenticated worker address";
}

}  // namespace
}  // namespace icn::adversary
