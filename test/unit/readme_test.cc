// The README documents every setting: the table in README.md must list each ICN_* variable.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/params.h"

namespace {
std::string readReadme() {
  std::ifstream in(std::string(ICN_SOURCE_DIR) + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST(Readme, DocumentsEverySetting) {
  std::string readme = readReadme();
  ASSERT_FALSE(readme.empty()) << "README.md not found";
  for (const auto& p : icn::params::table())
    EXPECT_NE(readme.find(std::string("`") + p.name + "`"), std::string::npos) << p.name << " is not in README.md";
}

// Type, default and help text too: each row of the table the params module generates (the one
// `icn-params --markdown` prints) must stand in README.md as it is, so the two cannot drift apart.
TEST(Readme, SettingsRowsMatchTheParamTable) {
  std::string readme = readReadme();
  ASSERT_FALSE(readme.empty()) << "README.md not found";
  std::istringstream rows(icn::params::markdownTable());
  std::string row;
  int checked = 0;
  while (std::getline(rows, row)) {
    if (row.rfind("| `ICN_", 0) != 0) continue;
    checked++;
    EXPECT_NE(readme.find(row), std::string::npos) << "README.md lacks or differs from this row:\n" << row;
  }
  EXPECT_EQ(checked, static_cast<int>(icn::params::table().size()));
}
