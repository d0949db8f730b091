#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "core/sysfs.h"
#include "topo_test_util.h"

namespace icn::topo::test {
namespace {

int nicIndex(const Machine& m, const std::string& name) {
  for (size_t i = 0; i < m.nics.size(); i++)
    if (m.nics[i].name == name) return static_cast<int>(i);
  return -1;
}

TEST(Probe, RealMachineWithGpuAndMlx5) {
  Machine m = probeFixture("hwloc/32em64t-2n8c2t-pci-normalio.xml", nullptr);
  EXPECT_EQ(m.hostname, "conan");
  EXPECT_EQ(m.numas.size(), 2u);
  ASSERT_EQ(m.gpus.size(), 3u);
  int ib = nicIndex(m, "mlx5_0");
  ASSERT_GE(ib, 0);
  EXPECT_TRUE(m.nics[ib].rdma);
  ASSERT_EQ(m.nics[ib].netdevs.size(), 1u);
  EXPECT_EQ(m.nics[ib].netdevs[0], "ib0");
  EXPECT_EQ(pciNuma(m, m.gpus[0].pci), 0);
  EXPECT_EQ(pciNuma(m, m.nics[ib].pci), 1);
  EXPECT_EQ(pciPath(m, m.gpus[0].pci, m.nics[ib].pci), PathType::SYS);
  EXPECT_EQ(gpuPath(m, 1, 2, nullptr), PathType::PHB);  // two root ports of one host bridge
  // Without NVML or facts nothing claims NVLink.
  for (const Gpu& g : m.gpus) EXPECT_FALSE(g.nvmlKnown);
}

TEST(Probe, RealMachinesWithoutGpus) {
  Machine a = probeFixture("hwloc/24em64t-2n6c2t-pci.xml", nullptr);
  EXPECT_GE(nicIndex(a, "mlx4_0"), 0);
  Machine b = probeFixture("hwloc/96em64t-4n4d3ca2co-pci.xml", nullptr);
  EXPECT_EQ(b.numas.size(), 4u);
  EXPECT_EQ(b.gpus.size(), 0u);
  EXPECT_EQ(b.nics.size(), 8u);
  EXPECT_EQ(pciPath(b, b.nics[0].pci, b.nics[1].pci), PathType::PIX);  // two ports of one card
  EXPECT_EQ(pciPath(b, b.nics[0].pci, b.nics[7].pci), PathType::SYS);
}

TEST(Probe, Dgx8PathTypes) {
  std::string sys = fixture("sys-dgx8");
  Machine m = probeFixture("dgx8.xml", &sys, "dgx8-facts.json");
  ASSERT_EQ(m.gpus.size(), 8u);
  ASSERT_EQ(m.nics.size(), 8u);
  int nv = 0;
  EXPECT_EQ(gpuPath(m, 0, 7, &nv), PathType::NV);
  EXPECT_EQ(nv, 18);
  EXPECT_EQ(pciPath(m, m.gpus[0].pci, m.nics[0].pci), PathType::PIX);   // same switch
  EXPECT_EQ(pciPath(m, m.gpus[0].pci, m.nics[2].pci), PathType::NODE);  // other switch, same socket
  EXPECT_EQ(pciPath(m, m.gpus[0].pci, m.nics[4].pci), PathType::SYS);
  Machine noFacts = probeFixture("dgx8.xml", &sys);
  EXPECT_EQ(gpuPath(noFacts, 0, 1, nullptr), PathType::PIX);  // PCIe view only
}

TEST(Probe, SysfsEnrichment) {
  std::string sys = fixture("sys-dgx8");
  Machine m = probeFixture("dgx8.xml", &sys, "dgx8-facts.json");
  const PciDevice& g0 = m.pci[m.gpus[0].pci];
  EXPECT_DOUBLE_EQ(g0.link.curGTs, 32.0);
  EXPECT_EQ(g0.link.maxWidth, 16);
  EXPECT_EQ(g0.localCpus.toList(), "0-15");
  EXPECT_EQ(g0.classCode, 0x030200u);
  const Nic& n0 = m.nics[0];
  EXPECT_EQ(n0.name, "mlx5_0");
  ASSERT_EQ(n0.ports.size(), 1u);
  EXPECT_EQ(n0.ports[0].state, "ACTIVE");
  EXPECT_EQ(n0.ports[0].linkLayer, "InfiniBand");
  EXPECT_DOUBLE_EQ(n0.ports[0].rateGbps, 400);
  EXPECT_EQ(n0.ports[0].activeMtu, 4096);
  EXPECT_EQ(m.pci[n0.pci].irqs.size(), 4u);
  EXPECT_TRUE(m.host.peermem);
  EXPECT_EQ(m.host.kernel, "6.5.0-1024-nvidia");
  EXPECT_TRUE(m.host.haveProcStatus);
  int dsp = m.pci[m.gpus[0].pci].parent;
  ASSERT_GE(dsp, 0);
  EXPECT_TRUE(m.pci[dsp].acsKnown);
  EXPECT_FALSE(m.pci[dsp].acsRedirect);
}

TEST(Probe, BadInputsAreErrorsNotCrashes) {
  ProbeOptions o;
  o.hwlocXml = "/nonexistent.xml";
  o.env = std::map<std::string, std::string>{};
  Machine m;
  std::string err;
  EXPECT_EQ(probe(o, m, err), Status::InvalidArgument);
  EXPECT_FALSE(err.empty());
  TempTree t;
  t.write("/bad.json", "{\"gpus\":[{\"busid\":\"0000:ff:00.0\"}]}");
  o.hwlocXml = fixture("dgx8.xml");
  o.factsFile = t.dir() + "/bad.json";
  EXPECT_EQ(probe(o, m, err), Status::InvalidArgument);
  EXPECT_NE(err.find("not in the PCI tree"), std::string::npos);
  t.write("/trunc.json", "{\"gpus\":[");
  o.factsFile = t.dir() + "/trunc.json";
  EXPECT_EQ(probe(o, m, err), Status::InvalidArgument);
}

// hwloc keeps bridge_type and osdev_type numbers from an XML document as they are; values outside hwloc's enums
// refuse the document with a reason instead of being loaded as enums (undefined behaviour).
TEST(Probe, UnknownHwlocEnumValuesAreRefused) {
  std::ifstream in(fixture("dgx8.xml"));
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto replaceFirst = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  TempTree t;
  t.write("/bridge.xml", replaceFirst("bridge_type=\"0-1\"", "bridge_type=\"9-1\""));
  t.write("/osdev.xml", replaceFirst("name=\"ib0\" osdev_type=\"2\"", "name=\"ib0\" osdev_type=\"77\""));
  ProbeOptions o;
  o.env = std::map<std::string, std::string>{};
  Machine m;
  std::string err;
  o.hwlocXml = t.dir() + "/bridge.xml";
  EXPECT_EQ(probe(o, m, err), Status::InvalidArgument);
  EXPECT_NE(err.find("unknown upstream type 9"), std::string::npos) << err;
  Machine m2;
  err.clear();
  o.hwlocXml = t.dir() + "/osdev.xml";
  EXPECT_EQ(probe(o, m2, err), Status::InvalidArgument);
  EXPECT_NE(err.find("OS device ib0 has unknown osdev_type 77"), std::string::npos) << err;
}

TEST(Sysfs, LinkSpeedStrings) {
  EXPECT_DOUBLE_EQ(parseLinkSpeed("16.0 GT/s PCIe"), 16.0);
  EXPECT_DOUBLE_EQ(parseLinkSpeed("8 GT/s"), 8.0);
  EXPECT_DOUBLE_EQ(parseLinkSpeed("Unknown"), 0.0);
  TempTree t;
  t.write("/x/y", "  42\n");
  SysRoot r(t.dir());
  EXPECT_EQ(r.integer("/x/y").value_or(-1), 42);
  EXPECT_FALSE(r.line("/x/none"));
}

// Links resolve inside the recorded tree and come back as the host would see them; a link out of the tree or to
// nothing resolves to nothing.
TEST(Sysfs, ResolveReportsHostPathsInsideTheRoot) {
  TempTree t;
  t.write("/sys/devices/pci0000:00/0000:17:00.0/vendor", "0x15b3\n");
  std::filesystem::create_directories(t.dir() + "/sys/class/net/eth0");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:17:00.0",
                                            t.dir() + "/sys/class/net/eth0/device");
  std::filesystem::create_directory_symlink("/usr", t.dir() + "/sys/class/net/eth0/outside");
  std::filesystem::create_directory_symlink("missing", t.dir() + "/sys/class/net/eth0/dangling");
  SysRoot r(t.dir() + "/");
  EXPECT_EQ(r.resolve("/sys/class/net/eth0/device").value_or("?"), "/sys/devices/pci0000:00/0000:17:00.0");
  EXPECT_EQ(r.line("/sys/class/net/eth0/device/vendor").value_or("?"), "0x15b3");
  EXPECT_FALSE(r.resolve("/sys/class/net/eth0/outside"));
  EXPECT_FALSE(r.resolve("/sys/class/net/eth0/dangling"));
  EXPECT_EQ(SysRoot("").resolve("/").value_or("?"), "/");
}

}  // namespace
}  // namespace icn::topo::test
