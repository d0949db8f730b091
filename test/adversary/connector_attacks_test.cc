// A hostile listener against the victim's own connect: it learns the communicator id from the victim's HELLO,
// answers it correctly (with the key too, when it holds it) and then sends bytes where the protocol allows none:
// right behind its HELLO, or an endless stream on the control socket while the victim sets up (TCP: its lanes are
// accepted and never spoken to; UCX: its worker never answers the wire-up). The victim's connect fails at once with
// a WARN naming the peer, and its memory does not grow with what the peer sends.
#include <gtest/gtest.h>

#include "victim.h"

namespace icn::adversary {
namespace {

constexpr const char* kKey = "adversary-suite-job-key-0123456789";
constexpr Ms kConnectLimit{5000};        // the victim's connect must end well before this...
constexpr const char* kDeadline = "20000";  // ...and its ICN_CONNECT_TIMEOUT_MS, so no timeout passes for a refusal
constexpr Ms kRefusedWithin{2000};
constexpr long kRssBoundKiB = 32 * 1024;

void expectRefused(const ConnectReport& rep) {
  EXPECT_EQ(rep.result, ncclRemoteError) << "the victim's connect did not fail";
  EXPECT_FALSE(rep.gotComm);
  EXPECT_LT(rep.took, kRefusedWithin) << "the victim's connect failed only after " << rep.took.count() << " ms";
  EXPECT_LT(rep.rssGrowthKiB, kRssBoundKiB) << "the victim's memory grew by " << rep.rssGrowthKiB << " KiB";
}

class KeyedConnector : public ::testing::TestWithParam<bool> {
 public:
  std::string key() const { return GetParam() ? kKey : ""; }
  std::vector<std::pair<std::string, std::string>> env() const {
    std::vector<std::pair<std::string, std::string>> e = {{"ICN_CONNECT_TIMEOUT_MS", kDeadline}};
    if (GetParam()) e.push_back({"ICN_AUTH_KEY", kKey});
    return e;
  }
};

// The acceptor says nothing after its HELLO: here one frame follows it in the same write.
TEST_P(KeyedConnector, BytesAfterTheAcceptorsHelloFailTheConnect) {
  const std::string key = this->key();
  auto out = runConnectAttack(
      [key](HostileListener& l, const std::function<bool()>& stop) {
        std::string why;
        const std::vector<uint8_t> extra = encodeFrame(FrameType::Ready, std::vector<uint8_t>(33, 0x11));
        ASSERT_TRUE(l.answer(key, extra, Ms(10000), &why)) << why;
        l.holdConnections(stop);
      },
      kConnectLimit, expectRefused, env());
  EXPECT_TRUE(out.victimWarnsNamingRogue({"handshake with ", "45 bytes after its HELLO, where the protocol allows none"}));
}

// 1 MiB writes on the control socket for as long as the victim reads them (at most 512 MiB).
TEST_P(KeyedConnector, EndlessControlStreamFailsTheConnectWithoutGrowingMemory) {
  const std::string key = this->key();
  auto out = runConnectAttack(
      [key](HostileListener& l, const std::function<bool()>& stop) {
        std::string why;
        ASSERT_TRUE(l.answer(key, {}, Ms(10000), &why)) << why;
        const size_t sent = l.stream(size_t(512) << 20, stop);
        fprintf(stderr, "adversary: %zu KiB written on the victim's control socket\n", sent >> 10);
        l.holdConnections(stop);
      },
      kConnectLimit, expectRefused, env());
  EXPECT_TRUE(out.victimWarnsNamingRogue({"handshake with ", "bytes after its HELLO, where the protocol allows none"}));
}

INSTANTIATE_TEST_SUITE_P(Adversary, KeyedConnector, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "WithKey" : "NoKey"); });

}  // namespace
}  // namespace icn::adversary
