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
#include <thread>

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
        auto hostile = rep.hostile();
        EXPECT_EQ(hostile.size(), 1u);
        for (auto* conn : hostile) {
          EXPECT_NE(conn->result, ncclSuccess) << "the hostile connection's receive";
          fprintf(stderr, "adversary: hostile connection's receive ended with NCCL result %d\n", int(conn->result));
        }
      },
      {{"ICN_TRANSPORT", "ib"}, {"ICN_IB_HCA", "=rxe1"}}, {{"ICN_IB_HCA", "=rxe0"}});
  EXPECT_TRUE(out.victimWarnsNamingRogue(c->warn)) << "no WARN naming the peer's address"
                                     << (c->warn.empty() ? "" : " and saying: " + c->warn.back());
}

INSTANTIATE_TEST_SUITE_P(Verbs, AdversaryIb, ::testing::Range<size_t>(0, 7),
                         [](const auto& info) { return std::string(cases()[info.param].name); });

// ---- the victim sends: the rogue is its receiver and writes the clear-to-send entries ----------------------------
//
// Rank 0 (the victim) connects through the plugin to the rogue's listener and to an honest receiver (rank 1
// through the plugin) and sends one 64 KiB message on each, from a buffer between guards. Rank 1 runs the rogue,
// which writes one CTS entry of its choosing into the victim's FIFO, and the honest receiver, which checks the
// pattern. The victim must fail the rogue's send (or, for an entry that is merely generous, send exactly its
// message there), with a WARN naming the peer's address; nothing in the victim changes, and the honest send
// completes.

constexpr size_t kMsg = 64 * 1024;

struct SendCase {
  const char* name;
  std::function<ib::CtsEntry(const IbRogue&)> entry;
  ncclResult_t code;  // the victim's send to the rogue
  const char* warn;   // nullptr: the send succeeds, no WARN
};

ib::CtsEntry entryFor(const IbRogue& r, uint64_t size) {
  ib::CtsEntry e{};
  e.addr = r.landingAddr();
  e.rkeys[0] = r.landingKey();
  e.size = size;
  e.tag = kTag;
  e.nreqs = 1;
  e.seq = 1;
  return e;
}

const std::vector<SendCase>& sendCases() {
  static const std::vector<SendCase> all = {
      {"EntrySmallerThanTheMessage", [](const IbRogue& r) { return entryFor(r, 100); }, ncclInvalidUsage,
       "isend of 65536 bytes (tag 7) exceeds the 100 bytes the receiver posted"},
      {"EntryWithTooManyReceives",
       [](const IbRogue& r) {
         auto e = entryFor(r, kMsg);
         e.nreqs = 9;
         return e;
       },
       ncclRemoteError, "CTS entry with 9 receives"},
      {"EntryPointingAtNoMemory",
       [](const IbRogue& r) {
         auto e = entryFor(r, kMsg);
         e.addr = 0x1000;
         e.rkeys[0] ^= 0x5a5a00;
         return e;
       },
       ncclRemoteError, "completion error"},
      {"EntryLargerThanTheMessage", [](const IbRogue& r) { return entryFor(r, 1 << 30); }, ncclSuccess, nullptr},
  };
  return all;
}

class AdversaryIbSender : public ::testing::TestWithParam<size_t> {};

TEST_P(AdversaryIbSender, VictimSendsOnlyItsMessage) {
  static const SendCase* c;
  c = &sendCases()[GetParam()];
  auto victim = [](Rank& r) {
    static Canary canary;
    canary.arm();
    char rogueHandle[NCCL_NET_HANDLE_MAXSIZE], honestHandle[NCCL_NET_HANDLE_MAXSIZE];
    ASSERT_TRUE(r.peer.recv(rogueHandle, sizeof rogueHandle));
    ASSERT_TRUE(r.peer.recv(honestHandle, sizeof honestHandle));
    void* toRogue = nullptr;
    void* toHonest = nullptr;
    ASSERT_EQ(netapi::connectBlocking(r.plugin, 0, rogueHandle, &toRogue, std::chrono::seconds(30)), ncclSuccess);
    ASSERT_EQ(netapi::connectBlocking(r.plugin, 0, honestHandle, &toHonest, std::chrono::seconds(30)), ncclSuccess);
    std::vector<uint8_t> buf(kMsg + 2 * kGuard, 0x5A);
    netapi::fillPattern(buf.data() + kGuard, kMsg, kHonestSeed);
    const std::vector<uint8_t> before = buf;
    void* reqs[2] = {};
    void* comms[2] = {toRogue, toHonest};
    ncclResult_t res[2] = {ncclSuccess, ncclSuccess};
    bool done[2] = {false, false};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
    while (!(done[0] && done[1]) && std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < 2; i++) {
        if (done[i]) continue;
        if (!reqs[i]) {
          res[i] = r.plugin.net->isend(comms[i], buf.data() + kGuard, kMsg, kTag, nullptr, nullptr, &reqs[i]);
          done[i] = res[i] != ncclSuccess;
          continue;
        }
        int d = 0, size = 0;
        res[i] = r.plugin.net->test(reqs[i], &d, &size);
        done[i] = res[i] != ncclSuccess || d;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    EXPECT_TRUE(done[0] && done[1]) << "the victim's sends did not finish within 40 s";
    EXPECT_EQ(res[0], c->code) << "the send to the rogue";
    EXPECT_EQ(res[1], ncclSuccess) << "the honest send";
    EXPECT_TRUE(buf == before) << "the victim's send buffer or its guards changed";
    EXPECT_TRUE(canary.intact());
    char b = 'x';
    ASSERT_TRUE(r.peer.send(&b, 1));
    ASSERT_TRUE(r.peer.recv(&b, 1, std::chrono::seconds(60)));
    r.plugin.net->closeSend(toRogue);
    EXPECT_EQ(r.plugin.net->closeSend(toHonest), ncclSuccess);
  };
  auto attacker = [](Rank& r) {
    const char* dev = getenv("ICN_ADVERSARY_IB_DEV");
    std::array<uint8_t, kHandleSize> rogueHandle{};
    std::string why;
    auto rogue = IbRogue::listen(dev ? dev : "rxe1", rogueHandle, &why);
    ASSERT_NE(rogue, nullptr) << why;
    char honestHandle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* l = nullptr;
    ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, honestHandle, &l), ncclSuccess);
    ASSERT_TRUE(r.peer.send(rogueHandle.data(), rogueHandle.size()));
    ASSERT_TRUE(r.peer.send(honestHandle, sizeof honestHandle));
    ASSERT_TRUE(rogue->accept(kCommId, Ms(30000), &why)) << why;
    fprintf(stderr, "adversary: hostile connection from %s\n", rogue->address().c_str());
    ASSERT_TRUE(rogue->writeCts(c->entry(*rogue))) << "the victim's FIFO refused the rogue's write";
    void* rc = nullptr;
    ASSERT_EQ(netapi::acceptBlocking(r.plugin, l, &rc, std::chrono::seconds(30)), ncclSuccess);
    std::vector<uint8_t> in(kPosted, 0);
    void* d = in.data();
    size_t sz = in.size();
    int tag = kTag;
    void* req = nullptr;
    ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
    int size = 0;
    EXPECT_EQ(netapi::waitRequest(r.plugin, req, &size, std::chrono::seconds(30)), ncclSuccess);
    EXPECT_EQ(size, int(kMsg));
    EXPECT_EQ(netapi::checkPattern(in.data(), kMsg, kHonestSeed), SIZE_MAX) << "the honest receiver's data";
    if (!c->warn) {  // a generous entry: exactly the message arrives, nothing past it
      EXPECT_EQ(rogue->receivedBytes(kMsg, Ms(10000)), kMsg);
      EXPECT_EQ(netapi::checkPattern(rogue->landing(), kMsg, kHonestSeed), SIZE_MAX);
      for (size_t i = kMsg; i < kMsg + 4096; i++)
        if (rogue->landing()[i] != 0) {
          ADD_FAILURE() << "the victim wrote past its message at byte " << i;
          break;
        }
    }
    char b = 0;
    ASSERT_TRUE(r.peer.recv(&b, 1, std::chrono::seconds(60)));
    rogue->closeAll();
    EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
    EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
    ASSERT_TRUE(r.peer.send(&b, 1));
  };
  std::array<testpair::RankSetup, 2> setup;
  for (auto& s : setup)
    s.env = {{"ICN_TRANSPORT", "ib"}, {"ICN_IB_QPS_PER_CONNECTION", "1"}, {"UCX_WARN_UNUSED_ENV_VARS", "n"}};
  setup[0].env.push_back({"ICN_IB_HCA", "=rxe0"});
  setup[1].env.push_back({"ICN_IB_HCA", "=rxe1"});
  AttackOutcome out;
  out.ranks = testpair::runPair(victim, attacker, setup, std::chrono::seconds(120));
  EXPECT_TRUE(out[0].cleanExit()) << "the victim crashed, hung or failed a check";
  EXPECT_TRUE(out[1].cleanExit()) << "the attacker rank failed a check";
  out.hostileAddress = announcedHostileAddress(out[1].log);  // the rogue's listener: what the victim names
  if (c->warn)
    EXPECT_TRUE(out.victimWarnsNamingRogue({c->warn})) << "no WARN naming the peer's address and saying: " << c->warn;
  else
    EXPECT_FALSE(out[0].warnHas({"rogue-peer"})) << "a generous entry was treated as an attack";
}

INSTANTIATE_TEST_SUITE_P(Verbs, AdversaryIbSender, ::testing::Range<size_t>(0, 4),
                         [](const auto& info) { return std::string(sendCases()[info.param].name); });

}  // namespace
}  // namespace icn::adversary
