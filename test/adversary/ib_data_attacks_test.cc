// Hostile verbs peers against ICN's ib transport (needs two verbs devices: the Soft-RoCE VM, test/vm). The rogue
// (IbRogue, raw libibverbs) passes the handshake as a sender, as anyone may without a job key, reads the victim's
// clear-to-send entry and then: writes past the receive (outside the memory region the rkey covers), writes
// pieces that add up to more than the receive, writes with an immediate that names no waiting receive, sends
// instead of writing, reads the receive buffer, or writes half a message and disappears. What a receiver
// advertises is the address, rkey and size of each posted buffer, so the peer can aim anywhere inside that
// registration; the NIC refuses anything outside it or without the access right. Each case: the victim's
// receive on that connection fails with a WARN naming the peer by its address, no byte outside the posted
// buffer changes (guards, canary), and the honest rank's connection on the same listener delivers its data.
// Victim on ICN_IB_HCA==rxe0 (shell syntax: exact name), honest rank and rogue on rxe1 (ICN_ADVERSARY_IB_DEV).
#include <gtest/gtest.h>

#include <functional>

#include "ib_rogue.h"
#include "transport/ib/ib_wire.h"
#include "victim.h"

namespace icn::adversary {
namespace {

using Cts = IbRogue::Cts;

uint32_t imm(uint32_t slot, uint32_t nchunks, uint32_t seq) {
  ib::Imm i;
  i.slot = slot;
  i.nchunks = nchunks;
  i.seq = seq & ib::kImmSeqMask;
  return ib::encodeImm(i);
}

struct Case {
  const char* name;
  std::function<void(IbRogue&, const Cts&)> attack;  // gtest assertions on what the rogue itself saw
  std::vector<std::string> warn;                      // besides the peer's address; empty: any WARN naming it
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"WriteBeyondTheReceive",
       [](IbRogue& r, const Cts& c) {
         EXPECT_NE(r.write(c.addr, c.rkey, uint32_t(c.size + 4096), imm(0, 1, c.seq)), IBV_WC_SUCCESS)
             << "the NIC let a write past the registration through";
         r.closeAll();  // the victim learns it from its QP or from the closed control connection
       },
       {}},
      {"WriteBeforeTheReceive",
       [](IbRogue& r, const Cts& c) {
         EXPECT_NE(r.write(c.addr - 4096, c.rkey, 4096, std::nullopt), IBV_WC_SUCCESS)
             << "the NIC let a write before the registration through";
         r.closeAll();
       },
       {}},
      {"PiecesAddingUpToMoreThanTheReceive",
       [](IbRogue& r, const Cts& c) {
         EXPECT_EQ(r.write(c.addr, c.rkey, uint32_t(c.size), imm(0, 2, c.seq)), IBV_WC_SUCCESS);
         EXPECT_EQ(r.write(c.addr, c.rkey, uint32_t(c.size), imm(0, 2, c.seq)), IBV_WC_SUCCESS);
       },
       {"peer wrote 524288 bytes in 2 chunk(s) (2 announced) into a receive of 262144 bytes (tag 7)"}},
      {"ImmediateForNoReceive",
       [](IbRogue& r, const Cts& c) { EXPECT_EQ(r.write(c.addr, c.rkey, 100, imm(5, 1, c.seq + 77)), IBV_WC_SUCCESS); },
       {"write-with-immediate for slot 5 seq 77 that no receive is waiting for"}},
      {"SendInsteadOfWrite", [](IbRogue& r, const Cts&) { EXPECT_EQ(r.sendEmpty(), IBV_WC_SUCCESS); },
       {"unexpected receive without immediate"}},
      {"ReadOfTheReceiveBuffer",
       [](IbRogue& r, const Cts& c) {
         EXPECT_NE(r.read(c.addr, c.rkey, 4096), IBV_WC_SUCCESS) << "the NIC let the peer read the receive buffer";
         for (size_t i = 0; i < 4096; i++)
           if (r.buffer()[i] != 0x77) {
             ADD_FAILURE() << "the rogue's buffer changed at byte " << i;
             break;
           }
         r.closeAll();
       },
       {}},
      {"HalfAMessageThenGone",
       [](IbRogue& r, const Cts& c) {
         EXPECT_EQ(r.write(c.addr, c.rkey, uint32_t(c.size / 2), std::nullopt), IBV_WC_SUCCESS);
         r.closeAll();
       },
       {"peer is gone"}},
  };
  return all;
}

class AdversaryIb : public ::testing::TestWithParam<size_t> {};

TEST_P(AdversaryIb, RefusedOnlyOnItsConnection) {
  static const Case* c;
  static std::unique_ptr<IbRogue> keepOpen;
  c = &cases()[GetParam()];
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        const char* dev = getenv("ICN_ADVERSARY_IB_DEV");
        std::string why;
        auto rogue = IbRogue::connect(to, kCommId, dev ? dev : "rxe1", Ms(20000), &why);
        ASSERT_NE(rogue, nullptr) << "the rogue could not complete the handshake: " << why;
        auto cts = rogue->waitCts();
        ASSERT_TRUE(cts.has_value()) << "no clear-to-send entry from the victim";
        EXPECT_EQ(cts->tag, kTag);
        EXPECT_EQ(cts->size, kPosted);
        c->attack(*rogue, *cts);
        keepOpen = std::move(rogue);
      },
      2,
      [](VictimReport& rep) {
        int refused = 0;
        for (auto& conn : rep.conns) {
          if (conn.holdsHonestPattern()) continue;
          refused++;
          EXPECT_NE(conn.result, ncclSuccess) << "the hostile connection's receive";
          fprintf(stderr, "adversary: hostile connection's receive ended with NCCL result %d\n", int(conn.result));
        }
        EXPECT_EQ(refused, 1);
      },
      {{"ICN_TRANSPORT", "ib"}, {"ICN_IB_HCA", "=rxe1"}}, {{"ICN_IB_HCA", "=rxe0"}});
  std::vector<std::string> want = {"rogue-peer:"};
  want.insert(want.end(), c->warn.begin(), c->warn.end());
  EXPECT_TRUE(out.victimWarns(want)) << "no WARN naming the peer's address"
                                     << (c->warn.empty() ? "" : " and saying: " + c->warn.back());
}

INSTANTIATE_TEST_SUITE_P(Verbs, AdversaryIb, ::testing::Range<size_t>(0, 7),
                         [](const auto& info) { return std::string(cases()[info.param].name); });

}  // namespace
}  // namespace icn::adversary
