#include <gtest/gtest.h>

#include "transport/ib/ib_select.h"

using namespace icn::ib;
static const std::string kFix = ICN_IB_FIXTURES;

static std::vector<HcaInfo> load(const std::string& name) {
  std::vector<HcaInfo> h;
  std::string why;
  EXPECT_EQ(scanSysfs(kFix + "/" + name, &h, &why), icn::Status::Ok) << why;
  return h;
}

TEST(IbGid, RocePrefersV2Ipv4OverLinkLocalAndV1) {
  auto h = load("mlx5-mixed");
  std::string why;
  EXPECT_EQ(selectGid(h[1].ports[0], -1, &why), 3) << why;
  EXPECT_NE(why.find("RoCE v2"), std::string::npos) << why;
}

TEST(IbGid, RoceFallsBackToGlobalIpv6ThenLinkLocal) {
  auto h = load("mlx5-mixed");
  PortInfo p = h[1].ports[0];
  std::erase_if(p.gids, [](const GidEntry& g) { return gidIsIpv4Mapped(g.gid); });
  std::string why;
  EXPECT_EQ(selectGid(p, -1, &why), 4) << "global IPv6 v2 GID before link-local: " << why;
  std::erase_if(p.gids, [](const GidEntry& g) { return g.index == 4; });
  EXPECT_EQ(selectGid(p, -1, &why), 1) << why;
  EXPECT_NE(why.find("link-local"), std::string::npos) << why;
}

TEST(IbGid, RxeRecordedTreePicksIpv4MappedIndex1) {
  auto h = load("rxe-vm");
  std::string why;
  EXPECT_EQ(selectGid(h[0].ports[0], -1, &why), 1) << why;
}

TEST(IbGid, UserIndexWinsWhenPopulatedAndFailsOtherwise) {
  auto h = load("mlx5-mixed");
  std::string why;
  EXPECT_EQ(selectGid(h[1].ports[0], 0, &why), 0);
  EXPECT_EQ(selectGid(h[1].ports[0], 5, &why), -1) << "index 5 is all zeros";
  EXPECT_NE(why.find("ICN_IB_GID_INDEX=5"), std::string::npos) << why;
}

TEST(IbGid, InfinibandUsesIndex0AndEmptyRoceFails) {
  auto h = load("mlx5-mixed");
  std::string why;
  EXPECT_EQ(selectGid(h[0].ports[0], -1, &why), 0);
  PortInfo empty;
  empty.ethernet = true;
  EXPECT_EQ(selectGid(empty, -1, &why), -1);
  EXPECT_NE(why.find("no GID"), std::string::npos);
}

TEST(IbHcaFilter, PrefixExactExcludeAndPorts) {
  auto f = HcaFilter::parse("mlx5_1");
  EXPECT_TRUE(f.matches("mlx5_1", 1));
  EXPECT_TRUE(f.matches("mlx5_10", 1)) << "prefix match by default";
  EXPECT_FALSE(f.matches("mlx5_0", 1));
  f = HcaFilter::parse("=mlx5_1");
  EXPECT_TRUE(f.matches("mlx5_1", 2));
  EXPECT_FALSE(f.matches("mlx5_10", 1));
  f = HcaFilter::parse("^mlx5_0");
  EXPECT_FALSE(f.matches("mlx5_0", 1));
  EXPECT_TRUE(f.matches("mlx5_1", 1));
  f = HcaFilter::parse("mlx5_0:1, mlx5_1:2");
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_1", 2));
  f = HcaFilter::parse("^=mlx5_0:1");
  EXPECT_FALSE(f.matches("mlx5_0", 1));
  EXPECT_TRUE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_00", 1));
  EXPECT_TRUE(HcaFilter::parse("").matches("anything", 3));
  EXPECT_TRUE(HcaFilter::parse(" , ").empty());
}

TEST(IbChoosePorts, ActivePortsThatPassTheFilter) {
  auto h = load("mlx5-mixed");
  std::string why;
  auto all = choosePorts(h, HcaFilter::parse(""), &why);
  ASSERT_EQ(all.size(), 2u) << "mlx5_2 is down";
  EXPECT_EQ(h[all[0].hca].name, "mlx5_0");
  EXPECT_EQ(h[all[1].hca].name, "mlx5_1");
  auto one = choosePorts(h, HcaFilter::parse("^mlx5_0"), &why);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(h[one[0].hca].name, "mlx5_1");
  auto none = choosePorts(h, HcaFilter::parse("=mlx5_2"), &why);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(why, "no active port");
  none = choosePorts(h, HcaFilter::parse("bnxt"), &why);
  EXPECT_TRUE(none.empty());
  EXPECT_NE(why.find("HCA filter"), std::string::npos) << why;
}

TEST(IbFusion, VirtualDeviceAddsSpeedsAndIntersectsPointerSupport) {
  std::vector<icn::DeviceProps> phys(3);
  phys[0].name = "mlx5_0";
  phys[0].speedMbps = 200000;
  phys[0].ptrSupport = icn::kMemHost | icn::kMemCuda | icn::kMemDmabuf;
  phys[0].pciPath = "/sys/devices/pci0000:00/0000:17:00.0";
  phys[0].maxComms = 1000;
  phys[1].name = "mlx5_1";
  phys[1].speedMbps = 100000;
  phys[1].ptrSupport = icn::kMemHost | icn::kMemCuda;
  phys[1].maxComms = 500;
  phys[2].name = "mlx5_2";
  icn::DeviceProps v;
  std::string why;
  const int two[] = {0, 1};
  ASSERT_EQ(fuseDevices(phys, two, &v, &why), icn::Status::Ok) << why;
  EXPECT_EQ(v.name, "mlx5_0+mlx5_1");
  EXPECT_EQ(v.speedMbps, 300000);
  EXPECT_EQ(v.ptrSupport, icn::kMemHost | icn::kMemCuda) << "dma-buf only if every member has it";
  EXPECT_EQ(v.pciPath, phys[0].pciPath);
  EXPECT_EQ(v.maxComms, 500);
  EXPECT_EQ(v.members, (std::vector<int>{0, 1}));
}

TEST(IbFusion, RejectsBadMemberLists) {
  std::vector<icn::DeviceProps> phys(2);
  icn::DeviceProps v;
  std::string why;
  const int dup[] = {1, 1};
  EXPECT_EQ(fuseDevices(phys, dup, &v, &why), icn::Status::InvalidArgument);
  EXPECT_NE(why.find("twice"), std::string::npos);
  const int out[] = {0, 5};
  EXPECT_EQ(fuseDevices(phys, out, &v, &why), icn::Status::InvalidArgument);
  EXPECT_NE(why.find("not a physical device"), std::string::npos);
  EXPECT_EQ(fuseDevices(phys, std::span<const int>(), &v, &why), icn::Status::InvalidArgument);
  const int five[] = {0, 1, 0, 1, 0};
  EXPECT_EQ(fuseDevices(phys, five, &v, &why), icn::Status::InvalidArgument);
}
