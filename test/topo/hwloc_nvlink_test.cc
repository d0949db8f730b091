// NVLinks from an hwloc XML export: the NVLinkBandwidth distances matrix that hwloc's NVML backend writes
// (nvswitch4.xml: 4 GPUs, each with one NVLink 2 link to each of 6 NVSwitches, 25000 MB/s per link).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "nccl_xml_validator.h"
#include "topo/model.h"
#include "topo_test_util.h"

namespace icn::topo::test {
namespace {

std::string runCli(const std::string& args) {
  std::string out;
  FILE* p = popen((std::string(ICN_TOPO_CLI) + " " + args + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  EXPECT_EQ(pclose(p), 0) << args;
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}

TEST(HwlocNvlink, MatrixBecomesGpuNvlinks) {
  Machine m = probeFixture("nvswitch4.xml", nullptr);
  ASSERT_EQ(m.gpus.size(), 4u);
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    const Gpu& g = m.gpus[i];
    EXPECT_TRUE(g.nvmlKnown);
    EXPECT_EQ(g.index, static_cast<int>(i)) << "nvml<N> gives the index";
    EXPECT_EQ(g.name, "Tesla V100-SXM3-32GB-H");
    EXPECT_EQ(g.nvlinkActive, 6);
    ASSERT_EQ(g.nvlinks.size(), 6u);
    for (const NvLink& l : g.nvlinks) {
      EXPECT_EQ(l.tclass, 0x068000u) << l.target;
      EXPECT_EQ(l.count, 1);
      int t = m.pciIndex(l.target);
      ASSERT_GE(t, 0) << l.target;
      EXPECT_EQ(m.pci[t].classCode >> 8, 0x0680u);
    }
  }
  int nv = 0;
  EXPECT_EQ(gpuPath(m, 0, 3, &nv), PathType::NV);  // across the switches: min(6, 6) links
  EXPECT_EQ(nv, 6);
}

TEST(HwlocNvlink, ExportsWithoutTheMatrixHaveNoNvlinks) {
  Machine m = probeFixture("dgx8.xml", nullptr);
  ASSERT_EQ(m.gpus.size(), 8u);
  for (const Gpu& g : m.gpus) {
    EXPECT_FALSE(g.nvmlKnown);  // no nvml OS devices in this export
    EXPECT_TRUE(g.nvlinks.empty());
  }
}

TEST(HwlocNvlink, ShowAndXmlNameTheLinks) {
  std::string show = runCli("show --hwloc-xml " + fixture("nvswitch4.xml"));
  EXPECT_NE(show.find("NV6"), std::string::npos) << show;
  EXPECT_NE(show.find("nvlink 6/6 up"), std::string::npos) << show;
  std::string json = runCli("show --json --hwloc-xml " + fixture("nvswitch4.xml"));
  EXPECT_EQ(count(json, "\"nvlink_active\":6"), 4u) << json;
  std::string xml = runCli("xml --hwloc-xml " + fixture("nvswitch4.xml"));
  auto v = validateNcclTopology(xml);
  EXPECT_TRUE(v.ok) << v.error;
  EXPECT_EQ(count(xml, "<gpu "), 4u) << xml;
  EXPECT_EQ(count(xml, "<nvlink "), 24u) << xml;
  EXPECT_EQ(count(xml, "tclass=\"0x068000\""), 24u) << xml;
  EXPECT_NE(xml.find("<nvlink target=\"0000:35:00.0\" count=\"1\" tclass=\"0x068000\""), std::string::npos) << xml;
}

}  // namespace
}  // namespace icn::topo::test
