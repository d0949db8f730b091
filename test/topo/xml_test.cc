#include <gtest/gtest.h>

#include "nccl_xml_validator.h"
#include "topo/nccl_xml.h"
#include "topo_test_util.h"

namespace icn::topo::test {
namespace {

std::string topoXml(const Machine& m) {
  std::string out, err;
  EXPECT_EQ(writeTopologyXml(m, out, err), Status::Ok) << err;
  return out;
}

void expectValid(const std::string& xml) {
  XmlCheck c = validateNcclTopology(xml);
  EXPECT_TRUE(c.ok) << c.error << "\n" << xml;
}

TEST(TopologyXml, EveryFixtureParsesUnderNcclRules) {
  std::string sys = fixture("sys-dgx8"), mis = fixture("sys-dgx8-misbound");
  for (const char* x : {"hwloc/24em64t-2n6c2t-pci.xml", "hwloc/32em64t-2n8c2t-pci-normalio.xml",
                        "hwloc/96em64t-4n4d3ca2co-pci.xml", "dgx8.xml", "dgx8-noloc.xml", "pcie2.xml"}) {
    SCOPED_TRACE(x);
    expectValid(topoXml(probeFixture(x, nullptr)));
  }
  expectValid(topoXml(probeFixture("dgx8.xml", &sys, "dgx8-facts.json")));
  expectValid(topoXml(probeFixture("dgx8.xml", &mis, "dgx8-facts.json")));
  expectValid(topoXml(probeFixture("dgx8-noloc.xml", nullptr, "dgx8-facts.json")));
}

TEST(TopologyXml, LiveMachineParsesUnderNcclRules) {
  ProbeOptions o;
  o.useNvml = false;
  o.useVerbs = false;
  o.env = std::map<std::string, std::string>{};
  Machine m;
  std::string err;
  ASSERT_EQ(probe(o, m, err), Status::Ok) << err;
  expectValid(topoXml(m));
}

TEST(TopologyXml, FoldsSwitchPortsLikeNccl) {
  std::string sys = fixture("sys-dgx8");
  std::string xml = topoXml(probeFixture("dgx8.xml", &sys, "dgx8-facts.json"));
  // cpu > upstream port 0000:11:00.0 > endpoints; root port 10:01.0 and downstream ports 12:0x.0 are folded.
  EXPECT_NE(xml.find("<pci busid=\"0000:11:00.0\" class=\"0x060400\""), std::string::npos);
  EXPECT_EQ(xml.find("0000:10:01.0"), std::string::npos);
  EXPECT_EQ(xml.find("0000:12:00.0"), std::string::npos);
  EXPECT_NE(xml.find("<gpu dev=\"7\" sm=\"90\">"), std::string::npos);
  EXPECT_NE(xml.find("<nvlink target=\"0000:00:00.0\" count=\"18\" tclass=\"0x068000\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<net name=\"mlx5_7\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<cpu numaid=\"1\" affinity=\"ffff0000\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" "
                     "modelid=\"143\">"),
            std::string::npos);
}

TEST(TopologyXml, WritesOnlyKnownFacts) {
  std::string xml = topoXml(probeFixture("dgx8.xml", nullptr));
  EXPECT_EQ(xml.find("<gpu"), std::string::npos);  // no NVML: NCCL fills dev/sm/nvlinks itself
  // Link from hwloc's GB/s alone (63.0 GB/s = 32 GT/s x16).
  EXPECT_NE(xml.find("busid=\"0000:13:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" "
                     "subsystem_vendor=\"0x10de\" subsystem_device=\"0x16c1\" link_speed=\"32.0 GT/s PCIe\" "
                     "link_width=\"16\""),
            std::string::npos);
  std::string real = topoXml(probeFixture("hwloc/32em64t-2n8c2t-pci-normalio.xml", nullptr));
  EXPECT_NE(real.find("link_speed=\"\" link_width=\"\""), std::string::npos);  // hwloc said 0 GB/s
  // A GPU straight under a root port hangs off the CPU node in NCCL's view.
  EXPECT_NE(real.find("  <cpu numaid=\"0\" affinity=\"00ff00ff\" arch=\"x86_64\">\n    <pci busid=\"0000:03:00.0\""),
            std::string::npos)
      << real;
}

TEST(TopologyXml, PcieServerPutsNicOnItsSocket) {
  std::string xml = topoXml(probeFixture("pcie2.xml", nullptr));
  size_t cpu1 = xml.find("<cpu numaid=\"1\"");
  ASSERT_NE(cpu1, std::string::npos);
  EXPECT_GT(xml.find("<net name=\"mlx5_0\"/>"), cpu1);
}

TEST(TopologyXml, RefusesMoreNodesThanNcclReads) {
  Machine m;
  m.numas.push_back(Numa{0, *CpuSet::parseList("0-3")});
  for (int i = 0; i < 100; i++) {
    PciDevice d;
    d.busid = formatBusId(static_cast<uint64_t>(i + 1) << 8);
    d.classCode = 0x020000;
    d.numa = 0;
    m.pci.push_back(d);
    Nic n;
    n.pci = i;
    n.name = "eth" + std::to_string(i);
    m.nics.push_back(n);
  }
  std::string out, err;
  EXPECT_EQ(writeTopologyXml(m, out, err), Status::InvalidUsage);
  EXPECT_NE(err.find("at most 256"), std::string::npos);
  // With a GPU the plain NICs are left out (NCCL detects them itself) rather than failing.
  PciDevice gpu;
  gpu.busid = "0000:ff:00.0";
  gpu.classCode = 0x030200;
  gpu.vendor = 0x10de;
  gpu.numa = 0;
  m.pci.push_back(gpu);
  Gpu g;
  g.pci = static_cast<int>(m.pci.size()) - 1;
  m.gpus.push_back(g);
  ASSERT_EQ(writeTopologyXml(m, out, err), Status::Ok) << err;
  expectValid(out);
  EXPECT_NE(out.find("0000:ff:00.0"), std::string::npos);
  EXPECT_EQ(out.find("<nic>"), std::string::npos);
  m.gpus.clear();
  m.pci.pop_back();
  m.pci.resize(60);
  m.nics.resize(60);
  ASSERT_EQ(writeTopologyXml(m, out, err), Status::Ok);
  expectValid(out);
}

TEST(Validator, RejectsWhatNcclMisreads) {
  const std::string good =
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:07:00.0\" class=\"0x030200\" "
      "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"/>\n  </cpu>\n</system>\n";
  ASSERT_TRUE(validateNcclTopology(good).ok) << validateNcclTopology(good).error;
  auto bad = [&](std::string from, std::string to) {
    std::string s = good;
    size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    s.replace(p, from.size(), to);
    XmlCheck c = validateNcclTopology(s);
    EXPECT_FALSE(c.ok) << "accepted after replacing '" << from << "' with '" << to << "'";
  };
  bad("  <cpu", "\t<cpu");
  bad("0000:07:00.0", "0000:0A:00.0");
  bad("0000:07:00.0", "07:00.0");
  bad("version=\"1\"", "version=\"2\"");
  bad("link_width=\"16\"/>", "link_width=\"16\" />");
  bad("16.0 GT/s PCIe", "16 GT/s PCIe");
  bad("<system", "<?xml version=\"1.0\"?>\n<system");
  bad("<cpu numaid=\"0\">", "<cpu>");
  bad("class=\"0x030200\"", "class=\"3\"");
  bad("<pci busid", "<gpu dev=\"0\"/><pci busid");
  bad("</cpu>", "</cpux>");
  std::string many = "<system version=\"1\">\n";
  for (int c = 0; c < 2; c++) {
    many += "  <cpu numaid=\"" + std::to_string(c) + "\">\n";
    for (int i = 0; i < 64; i++) many += "    <nic>\n      <net name=\"n" + std::to_string(i) + "\"/>\n    </nic>\n";
    many += "  </cpu>\n";
  }
  many += "</system>\n";
  XmlCheck c = validateNcclTopology(many);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.error.find("limit"), std::string::npos) << c.error;
}

}  // namespace
}  // namespace icn::topo::test
