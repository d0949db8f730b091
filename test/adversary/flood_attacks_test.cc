// Floods of connections that pass their proof (trivially without a job key; with one, from a peer that holds it)
// and then stall: handshakes that never send READY nor open a lane, and TCP connections whose lanes all prove
// but never finish. Each case: the victim (limited to 1024 descriptors, as a job's default) holds no more than
// its set-up budget of sockets, never runs out of descriptors, names the flooding peer in a WARN, and the honest
// rank that connects while the flood's connections are held open is through within 1 s.
#include <gtest/gtest.h>

#include "core/oob.h"
#include "victim.h"

namespace icn::adversary {
namespace {

constexpr const char* kKey = "adversary-suite-job-key-0123456789";
constexpr size_t kFlood = 1018;  // what locked a 1024-descriptor victim out: it held 1023
constexpr Ms kHonestWithin{1000};
constexpr size_t kDefaultSetupCap = 64;  // ICN_LISTEN_MAX_SETUPS's default

// Descriptors the victim has open beyond its set-up sockets at most: the honest comm's (TCP: 2 + lanes), and under
// UCX what its context and the workers of set-ups in progress open (at most 16 set-ups hold a worker).
size_t victimSlack() { return transportUnderTest() == kTransportTcp ? 2 + kTcpStreams + 8 : 16 * 8 + 16; }

// How many of the flood's connections the victim still holds (the rest it closed).
size_t stillOpen(std::vector<std::unique_ptr<WirePeer>>& flood) {
  size_t open = 0;
  for (auto& p : flood) open += p->ok() && !p->closedByListener(Ms(0));
  return open;
}

void checkDescriptors(VictimReport& rep) {
  const int held = rep.maxFds - rep.baseFds;
  fprintf(stderr, "adversary: the victim held at most %d descriptors beyond its own (budget %zu)\n", held,
          setupBudget(kDefaultSetupCap));
  EXPECT_LE(size_t(std::max(held, 0)), setupBudget(kDefaultSetupCap) + victimSlack())
      << "the victim held more descriptors than its set-up budget allows";
}

class KeyedFlood : public ::testing::TestWithParam<bool> {
 public:
  std::string key() const { return GetParam() ? kKey : ""; }
  std::vector<std::pair<std::string, std::string>> env() const {
    std::vector<std::pair<std::string, std::string>> e = {{"ICN_TCP_STREAMS", std::to_string(kTcpStreams)}};
    if (GetParam()) e.push_back({"ICN_AUTH_KEY", kKey});
    return e;
  }
};

TEST_P(KeyedFlood, ProvenIdleHandshakesLeaveRoomForHonestRanks) {
  const std::string key = this->key();
  honestConnectWithin(kHonestWithin);
  auto out = runAttack(
      [key](const SockAddr& to, const VictimInfo&) {
        raiseDescriptorLimit();
        static std::vector<std::unique_ptr<WirePeer>> flood;  // held open while the honest rank connects
        flood = provenIdleFlood(to, kCommId, kFlood, key);
        const size_t open = stillOpen(flood);
        fprintf(stderr, "adversary: the victim holds %zu of %zu proven idle connections\n", open, flood.size());
        EXPECT_LE(open, setupBudget(kDefaultSetupCap)) << "the victim kept more than its set-up budget";
      },
      1, checkDescriptors, env(), {{kVictimNofileVar, "1024"}});
  EXPECT_TRUE(out.victimWarnsNamingRogue({"over the " + std::to_string(setupBudget(kDefaultSetupCap)) +
                                          " that ICN_LISTEN_MAX_SETUPS=64 connections allow",
                                          "dropping the oldest set-up of"}));
  EXPECT_FALSE(out[0].logHas("Too many open files")) << "the victim ran out of descriptors";
}

INSTANTIATE_TEST_SUITE_P(Adversary, KeyedFlood, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "WithKey" : "NoKey"); });

// ICN TCP connections whose control handshake and every lane prove, and which never send READY: each holds a whole
// connection's sockets (control and 1 + ICN_TCP_STREAMS lanes), which count as one set-up with its lanes.
TEST(AdversaryTcp, UnfinishedConnectionsLeaveRoomForHonestRanks) {
  honestConnectWithin(kHonestWithin);
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        raiseDescriptorLimit();
        static std::vector<std::unique_ptr<WirePeer>> flood;
        flood = unfinishedTcpFlood(to, kCommId, 3 * kDefaultSetupCap, kTcpStreams, "");
        const size_t open = stillOpen(flood);
        fprintf(stderr, "adversary: the victim holds %zu of %zu sockets of unfinished connections\n", open,
                flood.size());
        EXPECT_LE(open, setupBudget(kDefaultSetupCap)) << "the victim kept more than its set-up budget";
        EXPECT_GE(open, setupBudget(kDefaultSetupCap) / 2) << "the flood's connections did not get far";
      },
      1, checkDescriptors, {{"ICN_TRANSPORT", "tcp"}, {"ICN_TCP_STREAMS", std::to_string(kTcpStreams)}},
      {{kVictimNofileVar, "1024"}});
  EXPECT_TRUE(out.victimWarnsNamingRogue({"dropping the oldest set-up of"}));
  EXPECT_FALSE(out[0].logHas("Too many open files")) << "the victim ran out of descriptors";
}

}  // namespace
}  // namespace icn::adversary
