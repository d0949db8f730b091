#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>

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
  for (size_t i = 0; i < table().size(); i++) {
    const Info& p = table()[i];
    EXPECT_TRUE(std::string(p.name).rfind("ICN_", 0) == 0) << p.name;
    EXPECT_GT(strlen(p.help), 10u) << p.name << " needs help text";
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
    // Values are stored by id: a row out of place would hand one setting's value to another.
    EXPECT_EQ(static_cast<size_t>(p.id), i) << p.name;
  }
  EXPECT_NE(markdownTable().find("| `ICN_TRANSPORT` | enum | `auto` |"), std::string::npos);
}

// Each name reaches its own setting: an integer set through the environment under a setting's name is what
// that setting reads, and every default parses as its type.
TEST(Params, EachNameSetsItsOwnValue) {
  for (const Info& p : table()) {
    if (p.type == Type::Int) {
      char* end = nullptr;
      strtoll(p.defaultValue, &end, 0);
      EXPECT_TRUE(*p.defaultValue && *end == 0) << p.name << ": default \"" << p.defaultValue << "\" is no integer";
      setenv(p.name, "424242", 1);
      reloadForTesting();
      EXPECT_EQ(getInt(p.id), 424242) << p.name;
      EXPECT_TRUE(isSetByUser(p.id)) << p.name;
      unsetenv(p.name);
    } else if (p.type == Type::Bool) {
      EXPECT_TRUE(!strcmp(p.defaultValue, "0") || !strcmp(p.defaultValue, "1")) << p.name;
    }
  }
  reloadForTesting();
}

// The README's settings table, read as a user reads it, names exactly the settings the code has: no row for a
// setting that does not exist (or was renamed), none missing.
TEST(Params, ReadmeSettingsTableNamesExactlyTheCodesSettings) {
  std::ifstream in(std::string(ICN_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::set<std::string> documented, code;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `ICN_", 0) != 0) continue;
    size_t end = line.find('`', 3);
    ASSERT_NE(end, std::string::npos) << line;
    EXPECT_TRUE(documented.insert(line.substr(3, end - 3)).second) << "README lists twice: " << line;
  }
  for (const Info& p : table()) code.insert(p.name);
  for (const auto& n : documented)
    EXPECT_TRUE(code.count(n)) << "README documents " << n << ", the code has no such setting";
  for (const auto& n : code) EXPECT_TRUE(documented.count(n)) << n << " has no row in README.md's settings table";
  EXPECT_GE(documented.size(), 30u) << "the README's settings table was not found";
}
