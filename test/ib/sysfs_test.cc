#include <gtest/gtest.h>

#include "transport/ib/ib_select.h"
#include "transport/ib/ib_sysfs.h"

using namespace icn::ib;
static const std::string kFix = ICN_IB_FIXTURES;

TEST(IbSysfs, ParsesHelpers) {
  std::array<uint8_t, 16> g{};
  ASSERT_TRUE(parseGid("fe80:0000:0000:0000:708e:f2ff:fe52:8290", &g));
  EXPECT_EQ(g[0], 0xfe);
  EXPECT_EQ(g[15], 0x90);
  EXPECT_EQ(gidToString(g), "fe80:0000:0000:0000:708e:f2ff:fe52:8290");
  EXPECT_FALSE(parseGid("fe80::1", &g));
  EXPECT_FALSE(parseGid("fe80:0000:0000:0000:708e:f2ff:fe52", &g));
  EXPECT_FALSE(parseGid("fe80:0000:0000:0000:708e:f2ff:fe52:82901", &g));
  EXPECT_FALSE(parseGid("xe80:0000:0000:0000:708e:f2ff:fe52:8290", &g));
  EXPECT_EQ(parseRateMbps("100 Gb/sec (4X EDR)"), 100000);
  EXPECT_EQ(parseRateMbps("2.5 Gb/sec (1X SDR)"), 2500);
  EXPECT_EQ(parseRateMbps("garbage"), 0);
  uint64_t guid = 0;
  ASSERT_TRUE(parseGuid("0c42:a103:0012:3450", &guid));
  EXPECT_EQ(guid, 0x0c42a10300123450ull);
  EXPECT_FALSE(parseGuid("0c42:a103:0012", &guid));
}

TEST(IbSysfs, ScansRecordedRxeTree) {
  std::vector<HcaInfo> hcas;
  std::string why;
  ASSERT_EQ(scanSysfs(kFix + "/rxe-vm", &hcas, &why), icn::Status::Ok) << why;
  ASSERT_EQ(hcas.size(), 2u);
  EXPECT_EQ(hcas[0].name, "rxe0");
  EXPECT_EQ(hcas[1].name, "rxe1");
  EXPECT_TRUE(hcas[0].pciPath.empty()) << "software device has no PCI function";
  ASSERT_EQ(hcas[0].ports.size(), 1u);
  const PortInfo& p = hcas[0].ports[0];
  EXPECT_TRUE(p.active);
  EXPECT_TRUE(p.ethernet);
  EXPECT_EQ(p.speedMbps, 10000);
  ASSERT_EQ(p.gids.size(), 2u) << "zero GIDs are dropped";
  EXPECT_EQ(p.gids[0].index, 0);
  EXPECT_EQ(p.gids[0].type, GidType::RoceV2);
  EXPECT_EQ(p.gids[0].ndev, "veth0");
  EXPECT_TRUE(gidIsLinkLocal(p.gids[0].gid));
  EXPECT_TRUE(gidIsIpv4Mapped(p.gids[1].gid));
}

TEST(IbSysfs, ScansMlx5TreeWithPciPathsAndGuids) {
  std::vector<HcaInfo> hcas;
  std::string why;
  ASSERT_EQ(scanSysfs(kFix + "/mlx5-mixed", &hcas, &why), icn::Status::Ok) << why;
  ASSERT_EQ(hcas.size(), 3u);
  EXPECT_EQ(hcas[0].pciPath, "/sys/devices/pci0000:00/0000:00:01.0/0000:17:00.0");
  EXPECT_EQ(hcas[0].guid, 0x0c42a10300123450ull);
  EXPECT_FALSE(hcas[0].ports[0].ethernet);
  EXPECT_EQ(hcas[0].ports[0].speedMbps, 200000);
  EXPECT_EQ(hcas[0].ports[0].lid, 0x12);
  EXPECT_EQ(hcas[1].ports[0].gids.size(), 5u);
  EXPECT_FALSE(hcas[2].ports[0].active);
  EXPECT_EQ(hcas[2].ports[0].speedMbps, 40000);
}

TEST(IbSysfs, MissingTreeSaysNoRdmaDevice) {
  std::vector<HcaInfo> hcas;
  std::string why;
  EXPECT_EQ(scanSysfs(kFix + "/does-not-exist", &hcas, &why), icn::Status::SystemError);
  EXPECT_NE(why.find("no RDMA device"), std::string::npos) << why;
}
