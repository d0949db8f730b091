#include <gtest/gtest.h>

#include <set>

#include "core/fixed_pool.h"

TEST(FixedPool, HandsOutEachSlotOnceAndRecycles) {
  icn::FixedPool<int, 32> pool;
  std::set<int*> seen;
  for (int i = 0; i < 32; i++) {
    int* p = pool.acquire();
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(pool.owns(p));
    EXPECT_TRUE(seen.insert(p).second);
  }
  EXPECT_EQ(pool.acquire(), nullptr) << "a 33rd request must be refused, not allocated";
  EXPECT_EQ(pool.inUse(), 32u);
  pool.release(*seen.begin());
  EXPECT_EQ(pool.acquire(), *seen.begin());
}
