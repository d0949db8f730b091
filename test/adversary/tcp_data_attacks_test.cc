// Hostile peers past the handshake on ICN's TCP transport: a peer that set up its control connection and lane 0
// honestly (as anyone may without a job key), read the victim's clear-to-send record, and then writes what ICN's
// senders never do: a message larger than the receive posted, a piece outside its message, pieces that add up
// to more than the message, data for a receive that is not posted or has another tag, an eager message nobody
// agreed to, garbage, or half a message before it disappears. Each case: the victim's receive on that
// connection fails with the NCCL error code of the cause and a WARN naming the peer by its address, no byte lands
// outside the posted buffer (guards), and the honest connection of the same listener delivers its data.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>

#include "transport/tcp/tcp_wire.h"
#include "victim.h"

namespace icn::adversary {
namespace {

using Cts = TcpRogue::Cts;

struct Case {
  const char* name;
  // The bytes the rogue writes on lane 0 after the victim's first clear-to-send record.
  std::function<std::vector<uint8_t>(const Cts&)> bytes;
  bool thenDisappear;  // close every socket afterwards (a peer that dies mid-transfer)
  ncclResult_t code;   // what the victim's test() returns on that connection
  std::vector<std::string> warn;
};

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<uint8_t> payload(size_t n) { return std::vector<uint8_t>(n, 0x77); }

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"MessageLargerThanThePostedReceive",
       [](const Cts& c) {
         uint32_t total = c.size + 2 * kGuard;
         return concat(TcpRogue::chunkHeader(c, total, 0, total), payload(total));
       },
       false, ncclInvalidUsage, {"message of 270336 bytes (tag 7) for a receive buffer of 262144 bytes"}},
      {"PieceOutsideItsMessage",
       [](const Cts& c) { return concat(TcpRogue::chunkHeader(c, 1000, c.size, 4096), payload(4096)); }, false,
       ncclRemoteError, {"message piece [262144, +4096) outside its 1000-byte message"}},
      {"PiecesAddingUpToMoreThanTheMessage",
       [](const Cts& c) {
         auto piece = concat(TcpRogue::chunkHeader(c, 1000, 0, 1000), payload(1000));
         return concat(piece, piece);
       },
       false, ncclRemoteError, {"more bytes than the 1000-byte message (tag 7)"}},
      {"DataForAReceiveThatIsNotPosted",
       [](const Cts& c) {
         Cts other = c;
         other.seq += 5;
         other.slot = uint8_t((c.slot + 3) % kMaxRequests);
         return concat(TcpRogue::chunkHeader(other, 100, 0, 100), payload(100));
       },
       false, ncclRemoteError, {"which is not posted"}},
      {"DataWithAnotherTag",
       [](const Cts& c) {
         Cts other = c;
         other.tag = c.tag + 1;
         return concat(TcpRogue::chunkHeader(other, 100, 0, 100), payload(100));
       },
       false, ncclRemoteError, {"data with tag 8 for receive", "posted with another tag or not at all"}},
      {"EagerMessageWithoutAnEagerLimit",
       [](const Cts& c) {
         auto h = TcpRogue::chunkHeader(c, 100, 0, 100);
         const uint16_t eager = tcp::kChunkEager;
         memcpy(h.data() + offsetof(tcp::ChunkHeader, flags), &eager, sizeof eager);
         memset(h.data() + offsetof(tcp::ChunkHeader, slot), 0, 2);  // eager messages name no slot
         return concat(h, payload(100));
       },
       false, ncclRemoteError, {"eager message of 100 bytes (limit 0) or not in one piece"}},
      {"Garbage",
       [](const Cts&) {
         std::mt19937 rng(5);
         std::vector<uint8_t> v(4096);
         for (auto& b : v) b = uint8_t(rng());
         return v;
       },
       false, ncclRemoteError, {"garbage where a message header was expected"}},
      {"HalfAMessageThenGone",
       [](const Cts& c) { return concat(TcpRogue::chunkHeader(c, c.size, 0, c.size), payload(c.size / 2)); }, true,
       ncclRemoteError, {"connection closed in the middle of a message"}},
  };
  return all;
}

class AdversaryTcp : public ::testing::TestWithParam<size_t> {};

TEST_P(AdversaryTcp, RefusedOnlyOnItsConnection) {
  static const Case* c;
  static std::unique_ptr<TcpRogue> keepOpen;
  c = &cases()[GetParam()];
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        std::string why;
        auto rogue = TcpRogue::connect(to, kCommId, Ms(20000), &why);
        ASSERT_NE(rogue, nullptr) << "the rogue could not complete the handshake: " << why;
        auto cts = rogue->readCts();
        ASSERT_TRUE(cts.has_value()) << "no clear-to-send record from the victim";
        EXPECT_EQ(cts->tag, kTag);
        EXPECT_EQ(cts->size, kPosted);
        rogue->send(c->bytes(*cts));  // the victim may close before all of it is out
        if (c->thenDisappear) rogue->closeAll();
        keepOpen = std::move(rogue);
      },
      2,
      [](VictimReport& rep) {
        auto hostile = rep.hostile();
        EXPECT_EQ(hostile.size(), 1u);
        for (auto* conn : hostile) EXPECT_EQ(conn->result, c->code) << "the hostile connection's receive";
      },
      {{"ICN_TRANSPORT", "tcp"}});
  EXPECT_TRUE(out.victimWarnsNamingRogue(c->warn)) << "no WARN naming the peer's address and saying: " << c->warn.back();
}

INSTANTIATE_TEST_SUITE_P(Data, AdversaryTcp, ::testing::Range<size_t>(0, 8),
                         [](const auto& info) { return std::string(cases()[info.param].name); });

}  // namespace
}  // namespace icn::adversary
