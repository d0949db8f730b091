// Per-peer summaries: connections to one peer merge, and the JSON a peer sends is read back whole or refused.
#include <gtest/gtest.h>

#include <memory>

#include "diagnose/summary.h"

using namespace icn::diagnose;

namespace {

constexpr uint64_t kMs = 1000000;

std::shared_ptr<LinkMonitor> monitor(int peer, Dir d) {
  return std::make_shared<LinkMonitor>(LinkInfo{0x77, 2, peer, "h2", "10.0.0.3", "h" + std::to_string(peer),
                                                "10.0.0." + std::to_string(peer + 1), d});
}

void exchange(LinkMonitor& m, int n, uint64_t waitNs, uint64_t start) {
  for (int i = 0; i < n; i++) {
    const uint64_t t = start + static_cast<uint64_t>(i) * 10 * kMs;
    const OpId op = m.posted(i, 1 << 20, t);
    m.ready(op, t + waitNs);
    m.done(op, 1 << 20, t + waitNs + 1 * kMs);
  }
}

}  // namespace

TEST(Summary, ConnectionsToOnePeerInOneDirectionMerge) {
  auto a = monitor(5, Dir::Recv), b = monitor(5, Dir::Recv), c = monitor(5, Dir::Send), d = monitor(6, Dir::Recv);
  exchange(*a, 10, 2 * kMs, 0);
  exchange(*b, 30, 2 * kMs, 0);
  exchange(*c, 5, 0, 0);
  exchange(*d, 5, 0, 0);
  const std::vector<PeerSummary> s = summarize({a, b, c, d});
  ASSERT_EQ(s.size(), 3u);
  const PeerSummary& r5 = s[1];  // ordered by (comm, rank, peer, dir): 5/send, 5/recv, 6/recv
  EXPECT_EQ(r5.peerRank, 5);
  EXPECT_EQ(r5.dir, Dir::Recv);
  EXPECT_EQ(r5.links, 2u);
  EXPECT_EQ(r5.fig.count, 40u);
  EXPECT_EQ(r5.fig.arrivals, 40u);
  EXPECT_NEAR(r5.fig.waitMedianS, 0.002, 0.002 * 0.125);
  EXPECT_NEAR(r5.fig.rateBps, (1 << 20) * 1e3, (1 << 20) * 1e3 / 8);  // the pace histogram's bucket width
  EXPECT_NEAR(r5.fig.rateRatio, 1.0, 1e-9);
  EXPECT_EQ(r5.peerAddr, "10.0.0.6");
  EXPECT_EQ(s[0].dir, Dir::Send);
  EXPECT_EQ(s[2].peerRank, 6);
  // The next summary holds only what happened since.
  exchange(*a, 3, 0, 1000 * kMs);
  EXPECT_EQ(summarize({a, b})[0].fig.count, 3u);
}

TEST(Summary, JsonRoundTrip) {
  auto a = monitor(1, Dir::Recv);
  exchange(*a, 12, 3 * kMs, 0);
  std::vector<PeerSummary> s = summarize({a});
  s[0].host = "h\"2\n";
  s[0].pending = 3;
  const std::string text = summariesToJson(s);
  std::vector<PeerSummary> back;
  std::string why;
  ASSERT_TRUE(summariesFromJson(text, &back, &why)) << why;
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(summariesToJson(back), text);
  EXPECT_EQ(back[0].host, "h\"2\n");
  EXPECT_EQ(back[0].commId, 0x77u);
  EXPECT_EQ(back[0].pending, 3u);
  EXPECT_EQ(back[0].fig.count, 12u);
  EXPECT_NEAR(back[0].fig.waitP90S, s[0].fig.waitP90S, s[0].fig.waitP90S * 1e-8);  // 9 significant digits
}

// Where the transport measured the wire (bytes acknowledged over the sockets' busy time), that is the period's
// rate, whatever the messages' timings say (a proxy polling late stretches them); too little of it, and the
// messages' timings are used.
TEST(Summary, WireMeasureIsThePeriodsRateWhereThereIsEnough) {
  auto a = monitor(1, Dir::Send);
  exchange(*a, 12, 0, 0);  // 1 MiB messages done 1 ms after ready: 1 GiB/s by their timings
  a->onWire(256 << 20, 160 * kMs);  // the wire: 256 MiB in 160 ms busy
  std::vector<PeerSummary> s = summarize({a});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].fig.rateWire);
  EXPECT_NEAR(s[0].fig.rateBps, (256 << 20) * 1e9 / (160.0 * kMs), 1e3);
  EXPECT_NEAR(s[0].fig.rateRatio, 1.0, 1e-9);
  exchange(*a, 12, 0, 1000 * kMs);
  a->onWire(128 << 20, 160 * kMs);  // half the pace: half its own history's (384 MiB over 320 ms) ... relative
  s = summarize({a});
  EXPECT_TRUE(s[0].fig.rateWire);
  EXPECT_NEAR(s[0].fig.rateRatio, (128.0 / 160) / (384.0 / 320), 1e-9);
  exchange(*a, 12, 0, 2000 * kMs);
  a->onWire(4 << 20, kWireMinNs - 1);  // too short a busy time
  s = summarize({a});
  EXPECT_FALSE(s[0].fig.rateWire);
  EXPECT_NEAR(s[0].fig.rateBps, (1 << 20) * 1e3, (1 << 20) * 1e3 / 8);
}

TEST(Summary, WireFlagAndStallShareTravel) {
  auto a = monitor(1, Dir::Send);
  exchange(*a, 12, 0, 0);
  a->onWire(256 << 20, kWireMinNs);
  std::vector<PeerSummary> s = summarize({a});
  s[0].fig.stallShare = 0.25;
  std::vector<PeerSummary> back;
  std::string why;
  ASSERT_TRUE(summariesFromJson(summariesToJson(s), &back, &why)) << why;
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0].fig.rateWire);
  EXPECT_DOUBLE_EQ(back[0].fig.stallShare, 0.25);
  std::string text = summariesToJson(s);
  text.replace(text.find("\"stall_share\":0.25"), 18, "\"stall_share\":1.50");
  EXPECT_FALSE(summariesFromJson(text, &back, &why)) << "a share above 1 is refused";
}

TEST(Summary, PeerTextOutOfBoundsIsRefusedWhole) {
  auto a = monitor(1, Dir::Recv);
  exchange(*a, 12, 3 * kMs, 0);
  const std::string one = toJson(summarize({a})[0]);
  auto refused = [](const std::string& text) {
    std::vector<PeerSummary> out{PeerSummary{}};
    std::string why;
    return !summariesFromJson(text, &out, &why) && out.size() == 1 && !why.empty();
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = one;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return "[" + one + "," + t.replace(at, from.size(), to) + "]";
  };
  EXPECT_TRUE(refused(one));  // not an array
  EXPECT_TRUE(refused(edit("\"dir\":\"recv\"", "\"dir\":\"sideways\"")));
  EXPECT_TRUE(refused(edit("\"commId\":\"0x77\"", "\"commId\":\"0x\"")));
  EXPECT_TRUE(refused(edit("\"commId\":\"0x77\"", "\"commId\":\"0x11112222333344445\"")));
  EXPECT_TRUE(refused(edit("\"rank\":2", "\"rank\":-7")));
  EXPECT_TRUE(refused(edit("\"count\":12", "\"count\":-1")));
  EXPECT_TRUE(refused(edit("\"wait_median_s\":", "\"wait_median_s\":1e9,\"x\":")));
  EXPECT_TRUE(refused(edit("\"host\":\"h2\"", "\"host\":\"" + std::string(256, 'h') + "\"")));
  EXPECT_TRUE(refused(edit("\"host\":\"h2\"", "\"host\":7")));
  std::string many = "[";
  for (size_t i = 0; i <= kMaxSummaries; i++) many += (i ? "," : "") + one;
  EXPECT_TRUE(refused(many + "]"));
  EXPECT_TRUE(refused(std::string(kMaxSummaryText + 1, ' ')));
  std::vector<PeerSummary> out;
  std::string why;
  EXPECT_TRUE(summariesFromJson("[" + one + "," + one + "]", &out, &why)) << why;
  EXPECT_EQ(out.size(), 2u);
}

TEST(Summary, CommIdText) {
  uint64_t id = 0;
  EXPECT_EQ(commIdText(0x7a3f09c2d4e1b850), "0x7a3f09c2d4e1b850");
  EXPECT_TRUE(parseCommId("0x7A3f09c2d4e1b850", &id));
  EXPECT_EQ(id, 0x7a3f09c2d4e1b850u);
  EXPECT_FALSE(parseCommId("7a3f", &id));
  EXPECT_FALSE(parseCommId("0xg", &id));
}
