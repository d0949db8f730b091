// The README documents every setting: the table in README.md must list each ICN_* variable.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/params.h"

TEST(Readme, DocumentsEverySetting) {
  std::ifstream in(std::string(ICN_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string readme = ss.str();
  for (const auto& p : icn::params::table())
    EXPECT_NE(readme.find(std::string("`") + p.name + "`"), std::string::npos) << p.name << " is not in README.md";
}
