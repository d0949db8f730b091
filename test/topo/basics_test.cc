#include <gtest/gtest.h>

#include "topo/cpuset.h"
#include "core/json.h"
#include "topo/model.h"

namespace icn::topo {

TEST(CpuSet, ListRoundTripAndMalformed) {
  auto s = CpuSet::parseList("0-3,8,10-11");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->count(), 7);
  EXPECT_EQ(s->toList(), "0-3,8,10-11");
  EXPECT_TRUE(s->test(8));
  EXPECT_FALSE(s->test(9));
  EXPECT_FALSE(CpuSet::parseList("3-1"));
  EXPECT_FALSE(CpuSet::parseList("a"));
  EXPECT_FALSE(CpuSet::parseList("1,,2"));
  EXPECT_TRUE(CpuSet::parseList("")->empty());
}

TEST(CpuSet, MaskMatchesSysfsCpumap) {
  auto s = CpuSet::parseList("0-15,32");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->toMask(), "00000001,0000ffff");
  EXPECT_EQ(s->toMask(3), "00000000,00000001,0000ffff");
  auto back = CpuSet::parseMask("00000001,0000ffff");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *s);
  EXPECT_EQ(CpuSet::parseMask("0xffffffff,0xffffffff")->count(), 64);  // hwloc's form
  EXPECT_FALSE(CpuSet::parseMask("xyz"));
  EXPECT_FALSE(CpuSet::parseMask("123456789"));  // a group is at most 8 digits
}

TEST(CpuSet, SetAlgebra) {
  auto a = *CpuSet::parseList("0-7"), b = *CpuSet::parseList("4-11");
  EXPECT_EQ((a & b).toList(), "4-7");
  EXPECT_EQ((a | b).toList(), "0-11");
  EXPECT_TRUE(a.intersects(b));
  EXPECT_FALSE(a.subsetOf(b));
  EXPECT_TRUE((a & b).subsetOf(b));
}

TEST(BusId, ParseAndNormalize) {
  EXPECT_EQ(normalizeBusId("0000:0A:00.0"), "0000:0a:00.0");
  EXPECT_EQ(normalizeBusId("00000000:07:00.0"), "0000:07:00.0");  // NVML's 8-digit domain
  EXPECT_EQ(normalizeBusId("0000:07:00"), "");
  EXPECT_EQ(normalizeBusId("0000:07:20.0"), "");  // device > 0x1f
  EXPECT_EQ(normalizeBusId("zz00:07:00.0"), "");
}

TEST(Json, ParsesAndRejects) {
  json::Value v;
  std::string err;
  ASSERT_TRUE(json::parse(R"({"a":[1,2.5,-3e2],"b":"x\u00e9\n","c":{"d":true,"e":null}})", v, err)) << err;
  EXPECT_EQ(v.get("a")->arr.size(), 3u);
  EXPECT_DOUBLE_EQ(v.get("a")->arr[2].num, -300);
  EXPECT_EQ(v.string("b"), "x\xc3\xa9\n");
  EXPECT_TRUE(v.get("c")->get("d")->b);
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "\"\x01\"", "1 2", "{\"a\":nul}", "[1e999]"}) {
    EXPECT_FALSE(json::parse(bad, v, err)) << bad;
    EXPECT_FALSE(err.empty());
  }
  std::string deep(1000, '[');
  EXPECT_FALSE(json::parse(deep, v, err));  // bounded depth, no stack overflow
  EXPECT_EQ(json::quote("a\"b\\\n"), "\"a\\\"b\\\\\\n\"");
}

}  // namespace icn::topo
