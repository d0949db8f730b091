#include <gtest/gtest.h>
#include <stdlib.h>

#include "core/params.h"

using namespace icn::params;

TEST(Params, DefaultsAndTypes) {
  unsetenv("ICN_TRANSPORT");
  unsetenv("ICN_IB_GID_INDEX");
  reloadForTesting();
  EXPECT_EQ(getString(Id::Transport), "auto");
  EXPECT_EQ(getInt(Id::IbGidIndex), -1);
  EXPECT_FALSE(isSetByUser(Id::Transport));
}

TEST(Params, EnvironmentOverridesAndBadValuesFallBack) {
  setenv("ICN_IB_QPS_PER_CONNECTION", "4", 1);
  setenv("ICN_GDR_FLUSH_DISABLE", "yes", 1);
  setenv("ICN_PEER_TIMEOUT_MS", "ten", 1);  // not an integer: default, with a warning
  reloadForTesting();
  EXPECT_EQ(getInt(Id::IbQpsPerConnection), 4);
  EXPECT_TRUE(getBool(Id::GdrFlushDisable));
  EXPECT_EQ(getInt(Id::PeerTimeoutMs), 10000);
  EXPECT_TRUE(isSetByUser(Id::IbQpsPerConnection));
  unsetenv("ICN_IB_QPS_PER_CONNECTION");
  unsetenv("ICN_GDR_FLUSH_DISABLE");
  unsetenv("ICN_PEER_TIMEOUT_MS");
  reloadForTesting();
  EXPECT_EQ(getInt(Id::IbQpsPerConnection), 1);
}

TEST(Params, TableIsCompleteAndUnique) {
  std::set<std::string> names;
  for (const Info& p : table()) {
    EXPECT_TRUE(std::string(p.name).rfind("ICN_", 0) == 0) << p.name;
    EXPECT_GT(strlen(p.help), 10u) << p.name << " needs help text";
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
  }
  EXPECT_EQ(table().size(), static_cast<size_t>(Id::Count));
  EXPECT_NE(markdownTable().find("| `ICN_TRANSPORT` | enum | `auto` |"), std::string::npos);
}
