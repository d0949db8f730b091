#include <gtest/gtest.h>

#include "core/iface_filter.h"

using icn::IfaceFilter;

TEST(IfaceFilter, PrefixList) {
  IfaceFilter f("eth,ib");
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("ib1"));
  EXPECT_FALSE(f.matches("lo"));
}

TEST(IfaceFilter, ExcludeAndExact) {
  IfaceFilter ex("^docker,lo");
  EXPECT_FALSE(ex.matches("docker0"));
  EXPECT_FALSE(ex.matches("lo"));
  EXPECT_TRUE(ex.matches("eth0"));
  IfaceFilter exact("=eth0");
  EXPECT_TRUE(exact.matches("eth0"));
  EXPECT_FALSE(exact.matches("eth01"));
  IfaceFilter notExact("^=eth0");
  EXPECT_FALSE(notExact.matches("eth0"));
  EXPECT_TRUE(notExact.matches("eth01"));
}

TEST(IfaceFilter, EmptyMatchesEverything) {
  EXPECT_TRUE(IfaceFilter("").matches("anything"));
  EXPECT_TRUE(IfaceFilter("^").matches("anything"));
}
