// Hostile peers past the handshake on ICN's TCP transport: a peer that set up its control connection and lane 0
// honestly (as anyone may without a job key), read the victim's clear-to-send record, and then writes what ICN's
// senders never do: a message larger than the receive posted, a piece outside its message, pieces that add up
// to more than the message, overlap or repeat, data for a receive that is not posted or has another tag, an eager
// message nobody agreed to, garbage, or half a message before it disappears; and a peer with a helper lane that
// floods eager messages without reading the records that hand credits back. Each case: the victim's receive on that
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
       false, ncclRemoteError, {"piece [0, +1000) of the 1000-byte message (tag 7) arrived twice"}},
      // Pieces whose lengths add up to the message but that leave some of it unwritten.
      {"OverlappingPiecesAddingUpToTheMessage",
       [](const Cts& c) {
         return concat(concat(TcpRogue::chunkHeader(c, 64, 0, 40), payload(40)),
                       concat(TcpRogue::chunkHeader(c, 64, 16, 24), payload(24)));
       },
       false, ncclRemoteError, {"piece [16, +24) of the 64-byte message (tag 7) overlaps bytes [0, 40) already received"}},
      {"DuplicatePieceAddingUpToTheMessage",
       [](const Cts& c) {
         auto half = concat(TcpRogue::chunkHeader(c, 64, 0, 32), payload(32));
         return concat(half, half);
       },
       false, ncclRemoteError, {"piece [0, +32) of the 64-byte message (tag 7) arrived twice"}},
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

INSTANTIATE_TEST_SUITE_P(Data, AdversaryTcp, ::testing::Range<size_t>(0, cases().size()),
                         [](const auto& info) { return std::string(cases()[info.param].name); });

// A peer that keeps a connection busy: the victim posts a receive each time one completes (as NCCL does), up to
// kReceives, and the attack must end its connection well before.
constexpr int kReceives = 2000;
std::vector<uint8_t> earlyFlood(uint32_t messages) {
  std::vector<uint8_t> out;
  const std::vector<uint8_t> bytes = payload(8);
  for (uint32_t n = 0; n < messages; n++) out = concat(std::move(out), TcpRogue::eagerMessage(kTag, 0, n, bytes));
  return out;
}
std::unique_ptr<TcpRogue> withHelperLane(const SockAddr& to) {
  std::string why;
  auto rogue = TcpRogue::connect(to, kCommId, Ms(20000), &why, 1);
  EXPECT_NE(rogue, nullptr) << "the rogue could not complete the handshake: " << why;
  if (!rogue) return nullptr;
  EXPECT_EQ(rogue->helperLanes(), 1) << "lanes the victim granted";
  return rogue->helperLanes() == 1 ? std::move(rogue) : nullptr;
}

// A sender with a helper lane reads the victim's first clear-to-send record and no other (its lane 0 buffer
// shrunk), then streams 8-byte eager messages on the helper lane (numbers 0, 1, 2, ..., horizon 0). Eager credits
// come back only in records, so it has only the 192 large ones it started with (it asked for no small ones): the
// next message ends its connection, and the records it leaves unread never outgrow the victim's bound.
TEST(AdversaryTcp, EagerFloodWithoutReadingRecords) {
  static std::unique_ptr<TcpRogue> keepOpen;
  victimReposts(kReceives);
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        auto rogue = withHelperLane(to);
        ASSERT_NE(rogue, nullptr);
        ASSERT_TRUE(rogue->readCts().has_value()) << "no clear-to-send record from the victim";
        rogue->shrinkReceiveBuffer(0, 2048);
        rogue->sendOn(1, earlyFlood(kReceives), Ms(2000));  // the victim stops reading once it refuses one
        keepOpen = std::move(rogue);
      },
      2,
      [](VictimReport& rep) {
        auto hostile = rep.hostile();
        ASSERT_EQ(hostile.size(), 1u);
        EXPECT_EQ(hostile[0]->result, ncclRemoteError) << "the hostile connection's receive";
        // The receive of the last message within its credits may instead fail: the connection fails (at the
        // next message) while the victim tests it.
        EXPECT_LE(hostile[0]->completed, int(tcp::kEarlyCredits)) << "receives the flood completed";
        EXPECT_GE(hostile[0]->completed, int(tcp::kEarlyCredits) - 1) << "receives the flood completed";
        EXPECT_LT(rep.rssGrowthKiB, 16 << 10) << "the victim's memory grew";
      },
      {{"ICN_TRANSPORT", "tcp"}});
  victimReposts(0);
  EXPECT_TRUE(out.victimWarnsNamingRogue({"eager message 192 spends a credit handed back in clear-to-send record 1, "
                                          "which it had not read (horizon 0)"}))
      << "no WARN naming the peer's address and the credit it had not read";
}

}  // namespace
}  // namespace icn::adversary
