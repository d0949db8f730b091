#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "nccl_xml_validator.h"
#include "topo/graph.h"
#include "topo_test_util.h"

namespace icn::topo::test {
namespace {

const std::vector<int> kMoeRing = {0, 5, 2, 7, 1, 4, 6, 3};  // planted by gen_fixtures.py

std::map<std::string, CommTraffic> moe() {
  std::map<std::string, CommTraffic> c;
  std::string err;
  EXPECT_EQ(loadHeatmaps({fixture("heatmap-moe8-0.json"), fixture("heatmap-moe8-1.json")}, c, err), Status::Ok) << err;
  return c;
}

bool sameCycle(std::vector<int> a, const std::vector<int>& b) {
  if (a.size() != b.size()) return false;
  for (int dir = 0; dir < 2; dir++) {
    for (size_t r = 0; r < a.size(); r++) {
      std::rotate(a.begin(), a.begin() + 1, a.end());
      if (a == b) return true;
    }
    std::reverse(a.begin(), a.end());
  }
  return false;
}

CommTraffic randomTraffic(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(0, 1000);
  CommTraffic t;
  t.nranks = n;
  t.bytes.assign(static_cast<size_t>(n) * n, 0);
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) t.bytes[a * n + b] = t.bytes[b * n + a] = std::floor(d(rng));
  return t;
}

TEST(Heatmap, MergesFilesByCommId) {
  auto c = moe();
  ASSERT_EQ(c.size(), 2u);
  const CommTraffic& t = c.at("0xabc8");
  EXPECT_EQ(t.nranks, 8);
  EXPECT_TRUE(std::all_of(t.reported.begin(), t.reported.end(), [](bool b) { return b; }));
  // Both ends report a pair: 2 x (send + recv) of 64 MiB.
  EXPECT_DOUBLE_EQ(t.at(0, 5), 4.0 * (64 << 20));
  EXPECT_DOUBLE_EQ(t.at(5, 0), t.at(0, 5));
  EXPECT_DOUBLE_EQ(t.at(0, 1), 4.0 * (1 << 20));
  EXPECT_EQ(c.at("0x2222").nranks, 2);
}

TEST(Heatmap, RejectsMalformedInput) {
  std::map<std::string, CommTraffic> c;
  std::string err;
  const char* bad[] = {
      "{\"version\":2,\"comms\":[]}",
      "{\"version\":1}",
      "{\"version\":1,\"comms\":[{\"commId\":\"0x1\",\"rank\":0,\"nranks\":0}]}",
      "{\"version\":1,\"comms\":[{\"commId\":\"0x1\",\"rank\":4,\"nranks\":4}]}",
      "{\"version\":1,\"comms\":[{\"commId\":\"0x1\",\"rank\":0,\"nranks\":4,\"peers\":[{\"peerRank\":9}]}]}",
      "{\"version\":1,\"comms\":[{\"commId\":\"0x1\",\"rank\":0,\"nranks\":4,\"peers\":[{\"peerRank\":1,"
      "\"send_bytes\":-5}]}]}",
      "[1,2",
  };
  for (const char* b : bad) {
    c.clear();
    EXPECT_EQ(mergeHeatmap(b, "x.json", c, err), Status::InvalidArgument) << b;
    EXPECT_EQ(err.rfind("x.json", 0), 0u) << err;
  }
  c.clear();
  ASSERT_EQ(mergeHeatmap("{\"version\":1,\"comms\":[{\"commId\":\"0x1\",\"rank\":0,\"nranks\":4}]}", "a", c, err),
            Status::Ok);
  EXPECT_EQ(mergeHeatmap("{\"version\":1,\"comms\":[{\"commId\":\"0x1\",\"rank\":1,\"nranks\":8}]}", "b", c, err),
            Status::InvalidArgument);
  EXPECT_NE(err.find("disagrees"), std::string::npos);
  EXPECT_EQ(loadHeatmaps({"/nonexistent.json"}, c, err), Status::InvalidArgument);
}

TEST(Ring, FindsThePlantedMoeRing) {
  auto c = moe();
  const CommTraffic& t = c.at("0xabc8");
  std::vector<int> ring = ringOrder(t);
  EXPECT_TRUE(sameCycle(ring, kMoeRing)) << ::testing::PrintToString(ring);
  EXPECT_EQ(ring.front(), 0);
  std::vector<int> identity(8);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_GT(ringWeight(t, ring), 3 * ringWeight(t, identity));
}

TEST(Ring, ExactMatchesBruteForce) {
  for (unsigned seed = 1; seed <= 20; seed++) {
    CommTraffic t = randomTraffic(7, seed);
    std::vector<int> perm = {1, 2, 3, 4, 5, 6};
    double best = 0;
    do {
      std::vector<int> r = {0};
      r.insert(r.end(), perm.begin(), perm.end());
      best = std::max(best, ringWeight(t, r));
    } while (std::next_permutation(perm.begin(), perm.end()));
    EXPECT_DOUBLE_EQ(ringWeight(t, ringOrder(t)), best) << "seed " << seed;
  }
}

TEST(Ring, LargeCommunicatorsUseGreedyPlusTwoOpt) {
  int n = 24;
  CommTraffic t = randomTraffic(n, 7);
  std::vector<int> planted(n);
  std::iota(planted.begin(), planted.end(), 0);
  std::shuffle(planted.begin() + 1, planted.end(), std::mt19937(3));
  for (int i = 0; i < n; i++) {
    int a = planted[i], b = planted[(i + 1) % n];
    t.bytes[a * n + b] = t.bytes[b * n + a] = 1e9;
  }
  std::vector<int> ring = ringOrder(t);
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; i++) ASSERT_EQ(sorted[i], i);  // a permutation
  EXPECT_TRUE(sameCycle(ring, planted)) << ::testing::PrintToString(ring);
}

TEST(Ring, TinyCommunicators) {
  CommTraffic t;
  t.nranks = 1;
  t.bytes.assign(1, 0);
  EXPECT_EQ(ringOrder(t), std::vector<int>({0}));
  t = randomTraffic(3, 1);
  EXPECT_EQ(ringOrder(t).size(), 3u);
}

TEST(GraphXml, ValidAndOrderedOnDgx8) {
  auto c = moe();
  const CommTraffic& t = c.at("0xabc8");
  std::string sys = fixture("sys-dgx8");
  Machine m = probeFixture("dgx8.xml", &sys, "dgx8-facts.json");
  std::vector<int> ring = ringOrder(t);
  std::string xml, err;
  ASSERT_EQ(writeGraphXml(t, ring, m, {}, xml, err), Status::Ok) << err;
  XmlCheck v = validateNcclGraph(xml);
  ASSERT_TRUE(v.ok) << v.error << "\n" << xml;
  EXPECT_NE(xml.find("typeintra=\"NVL\""), std::string::npos);
  EXPECT_NE(xml.find("pattern=\"4\""), std::string::npos);
  EXPECT_NE(xml.find("nchannels=\"16\""), std::string::npos);  // 18 NVLinks x 20.6 GB/s -> 16 channels
  // First channel follows the ring: 0 3 6 4 1 7 2 5 (the planted ring, canonical direction).
  std::string ch0 = xml.substr(xml.find("<channel>"), xml.find("</channel>") - xml.find("<channel>"));
  std::string expect;
  for (int r : ring) expect += std::string("<gpudev=\"") + (r == 0 ? "0" : "0x" + std::to_string(r)) + "\"/>";
  std::string flat;
  for (char ch : ch0)
    if (ch != ' ' && ch != '\n') flat += ch;
  EXPECT_NE(flat.find(expect), std::string::npos) << flat << "\n" << expect;
}

TEST(GraphXml, PcieMachineAndExplicitDevs) {
  CommTraffic t = randomTraffic(2, 1);
  Machine m = probeFixture("pcie2.xml", nullptr);
  std::string xml, err;
  ASSERT_EQ(writeGraphXml(t, ringOrder(t), m, {}, xml, err), Status::Ok) << err;
  EXPECT_TRUE(validateNcclGraph(xml).ok) << validateNcclGraph(xml).error;
  EXPECT_NE(xml.find("typeintra=\"PHB\""), std::string::npos);
  GraphParams p;
  p.devs = {12, 10};
  p.nchannels = 4;
  p.speedIntra = 12.5;
  ASSERT_EQ(writeGraphXml(t, ringOrder(t), Machine{}, p, xml, err), Status::Ok) << err;
  EXPECT_TRUE(validateNcclGraph(xml).ok);
  EXPECT_NE(xml.find("<gpu dev=\"0xc\"/>"), std::string::npos);
  EXPECT_NE(xml.find("speedintra=\"12.5\""), std::string::npos);
  p.devs = {1, 1};
  EXPECT_EQ(writeGraphXml(t, ringOrder(t), Machine{}, p, xml, err), Status::InvalidArgument);
  p.devs = {1};
  EXPECT_EQ(writeGraphXml(t, ringOrder(t), Machine{}, p, xml, err), Status::InvalidArgument);
  p.devs = {};
  p.typeIntra = "FAST";
  EXPECT_EQ(writeGraphXml(t, ringOrder(t), Machine{}, p, xml, err), Status::InvalidArgument);
}

TEST(GraphValidator, RejectsBrokenGraphs) {
  std::string good =
      "<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"1\" speedintra=\"20\" "
      "speedinter=\"20\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"0\">\n    <channel>\n"
      "      <gpu dev=\"0\"/>\n      <gpu dev=\"0x1\"/>\n    </channel>\n  </graph>\n</graphs>\n";
  ASSERT_TRUE(validateNcclGraph(good).ok) << validateNcclGraph(good).error;
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{{"nchannels=\"1\"", "nchannels=\"2\""},
                                                                          {"NVL", "NVLINK"},
                                                                          {"0x1", "0"},
                                                                          {"0x1", "zz"},
                                                                          {" samechannels=\"0\"", ""}}) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    EXPECT_FALSE(validateNcclGraph(s).ok) << from << " -> " << to;
  }
}

}  // namespace
}  // namespace icn::topo::test
