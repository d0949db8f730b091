// Hostile peers past the handshake (UCX transport): a peer that completed ICN's handshake honestly, as anyone
// may without a job key, then sends what ICN's senders never do: the descriptor of the removed same-host path
// (addresses of the victim's own memory and of a third process) with and without its tag bit, the wire-up tag,
// more bytes than the receive posted. No address a peer sends is ever read or written: canaries in the victim
// and in a third process stay untouched, only the hostile connection fails (with a WARN naming the peer), and
// the honest connection of the same listener delivers its data.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "victim.h"

namespace icn::adversary {
namespace {

// A third process on the same host holding a canary; it reports whether the canary is intact when asked.
class Bystander {
 public:
  Bystander() {
    int toChild[2], fromChild[2];
    if (pipe(toChild) != 0 || pipe(fromChild) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      static Canary c;
      c.arm();
      uint64_t addrs[2] = {reinterpret_cast<uint64_t>(c.secret), reinterpret_cast<uint64_t>(&c.doneWord)};
      (void)!write(fromChild[1], addrs, sizeof addrs);
      char b;
      (void)!read(toChild[0], &b, 1);
      char verdict = c.intact() ? 'Y' : 'N';
      (void)!write(fromChild[1], &verdict, 1);
      _exit(0);
    }
    close(toChild[0]);
    close(fromChild[1]);
    to_ = toChild[1];
    from_ = fromChild[0];
    if (read(from_, addrs_, sizeof addrs_) != sizeof addrs_) pid_ = -1;
  }
  ~Bystander() {
    if (pid_ > 0) {
      close(to_);
      waitpid(pid_, nullptr, 0);
      close(from_);
    }
  }
  pid_t pid() const { return pid_; }
  uint64_t secret() const { return addrs_[0]; }
  uint64_t doneWord() const { return addrs_[1]; }
  bool canaryIntact() {
    char b = 'c', verdict = 0;
    return write(to_, &b, 1) == 1 && read(from_, &verdict, 1) == 1 && verdict == 'Y';
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  uint64_t addrs_[2] = {};
};

std::unique_ptr<UcxRogue> rogueOrFail(const SockAddr& to) {
  std::string why;
  auto r = UcxRogue::connect(to, kCommId, Ms(20000), &why);
  EXPECT_NE(r, nullptr) << "the rogue could not complete the handshake: " << why;
  return r;
}

// The rogue's connection: the one that did not receive the honest pattern.
const VictimConn* rogueConn(VictimReport& rep) {
  auto hostile = rep.hostile();
  return hostile.empty() ? nullptr : hostile.front();
}

bool holds(const VictimConn& c, const void* bytes, size_t n) {
  const uint8_t* d = c.buf.data() + kGuard;
  return std::search(d, d + kPosted, static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + n) !=
         d + kPosted;
}

std::vector<uint8_t> victimSecretPrefix() {  // Canary::arm's secret, as the victim holds it
  std::vector<uint8_t> s(32);
  for (int i = 0; i < 32; i++) s[i] = uint8_t(0xA0 + i);
  return s;
}

// The exact message that made a receiver store 1 at a chosen address and copy 32 bytes of its own memory into
// the receive buffer: refused, nothing dereferenced. Two rogues, one descriptor each (a refused connection reads
// nothing more): one at the victim's own memory, one at a third process's. The third process's canary is read
// once the victim has handled both.
TEST(AdversaryUcx, OldFastPathDescriptorIsRefusedNotDereferenced) {
  static std::unique_ptr<UcxRogue> keepOpen[2];
  static std::unique_ptr<Bystander> third;
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo& v) {
        third = std::make_unique<Bystander>();
        ASSERT_GT(third->pid(), 0);
        for (auto& k : keepOpen) {
          k = rogueOrFail(to);
          ASSERT_NE(k, nullptr);
        }
        auto own = forgedDescriptor(v.secretAddr, 32, v.doneWordAddr, v.pid);
        EXPECT_TRUE(keepOpen[0]->send(own.data(), own.size(), kOldFastPathTagBit | kTag));
        auto other = forgedDescriptor(third->secret(), 32, third->doneWord(), third->pid());
        EXPECT_TRUE(keepOpen[1]->send(other.data(), other.size(), kOldFastPathTagBit | kTag));
        afterVictim([] { EXPECT_TRUE(third->canaryIntact()) << "a third process's memory was read or written"; });
      },
      3,
      [](VictimReport& rep) {
        auto secret = victimSecretPrefix();
        auto hostile = rep.hostile();
        EXPECT_EQ(hostile.size(), 2u);
        for (auto* c : hostile) {
          EXPECT_EQ(c->result, ncclRemoteError) << "a descriptor with the old fast-path bit was accepted";
          EXPECT_FALSE(holds(*c, secret.data(), secret.size())) << "the victim copied its own memory into the buffer";
        }
      },
      {{"ICN_TRANSPORT", "ucx"}});
  EXPECT_TRUE(out.victimWarns({"message from rogue-peer:", "carries UCX tag bits 0x40000000 that ICN never sends"}));
}

// Without the tag bit the same 40 bytes are a plain message: they arrive as data, nothing more.
TEST(AdversaryUcx, DescriptorBytesWithoutTheBitArriveAsPlainData) {
  static std::unique_ptr<UcxRogue> keepOpen;
  static std::array<uint8_t, 40> sent;
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo& v) {
        auto rogue = rogueOrFail(to);
        ASSERT_NE(rogue, nullptr);
        sent = forgedDescriptor(v.secretAddr, 32, v.doneWordAddr, v.pid);
        EXPECT_TRUE(rogue->send(sent.data(), sent.size(), kTag));
        keepOpen = std::move(rogue);
      },
      2,
      [](VictimReport& rep) {
        const VictimConn* c = rogueConn(rep);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->result, ncclSuccess);
        EXPECT_EQ(c->got, 40);
        // The victim rebuilds what the rogue must have sent from what it told rank 1.
        VictimInfo self{getpid(), 0, 0};
        const uint8_t* d = c->buf.data() + kGuard;
        uint64_t words[5];
        memcpy(words, d, sizeof words);
        EXPECT_EQ(words[0], 0x49434e4644455343ULL);
        EXPECT_EQ(int64_t(words[4]), self.pid);
        auto secret = victimSecretPrefix();
        EXPECT_FALSE(holds(*c, secret.data(), secret.size()));
      },
      {{"ICN_TRANSPORT", "ucx"}});
  EXPECT_FALSE(out[0].warnHas({"rogue-peer"})) << "plain data was treated as an attack";
}

// The wire-up probe's tag bit after the connection is up: refused the same way.
TEST(AdversaryUcx, WireupTagAfterSetupIsRefused) {
  static std::unique_ptr<UcxRogue> keepOpen;
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        auto rogue = rogueOrFail(to);
        ASSERT_NE(rogue, nullptr);
        std::vector<uint8_t> junk(1000, 0x33);
        EXPECT_TRUE(rogue->send(junk.data(), junk.size(), (uint64_t{1} << 63) | kTag));
        keepOpen = std::move(rogue);
      },
      2,
      [](VictimReport& rep) {
        const VictimConn* c = rogueConn(rep);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->result, ncclRemoteError);
      },
      {{"ICN_TRANSPORT", "ucx"}});
  EXPECT_TRUE(out.victimWarns({"message from rogue-peer:", "carries UCX tag bits 0x80000000"}));
}

// More bytes than the receive posted: the receive fails, nothing lands past the buffer.
TEST(AdversaryUcx, OversizedMessageFailsOnlyItsConnection) {
  static std::unique_ptr<UcxRogue> keepOpen;
  auto out = runAttack(
      [](const SockAddr& to, const VictimInfo&) {
        auto rogue = rogueOrFail(to);
        ASSERT_NE(rogue, nullptr);
        std::vector<uint8_t> big(kPosted + kGuard * 2, 0x77);
        rogue->send(big.data(), big.size(), kTag, Ms(3000));  // UCX may or may not report the truncation here
        keepOpen = std::move(rogue);
      },
      2,
      [](VictimReport& rep) {
        const VictimConn* c = rogueConn(rep);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->result, ncclRemoteError);
      },
      {{"ICN_TRANSPORT", "ucx"}});
  EXPECT_TRUE(out.victimWarns({"UCX transfer with rogue-peer:", "failed (tag 7, 262144 bytes posted)"}));
}

}  // namespace
}  // namespace icn::adversary
