#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "core/params.h"
#include "../reliability/log_capture.h"

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
  EXPECT_NE(markdownTable().find("| `ICN_TRANSPORT` | enum | `auto` |  |"), std::string::npos);
}

// Each name reaches its own setting: an integer within its bounds, other than its default, set through the
// environment under a setting's name is what that setting reads, and every default parses as its type.
TEST(Params, EachNameSetsItsOwnValue) {
  for (const Info& p : table()) {
    if (p.type == Type::Int || p.type == Type::IntOrZero) {
      char* end = nullptr;
      const long long def = strtoll(p.defaultValue, &end, 0);
      EXPECT_TRUE(*p.defaultValue && *end == 0) << p.name << ": default \"" << p.defaultValue << "\" is no integer";
      const int64_t pick = def != p.max ? p.max : p.min;
      setenv(p.name, std::to_string(pick).c_str(), 1);
      reloadForTesting();
      EXPECT_EQ(getInt(p.id), pick) << p.name;
      EXPECT_TRUE(isSetByUser(p.id)) << p.name;
      unsetenv(p.name);
    } else if (p.type == Type::Bool) {
      EXPECT_TRUE(!strcmp(p.defaultValue, "0") || !strcmp(p.defaultValue, "1")) << p.name;
    }
  }
  reloadForTesting();
}

// A value outside a setting's bounds is refused where it is read: a WARN naming the variable, the value and the
// range, and the default in its place; the bounds themselves are accepted.
TEST(Params, OutOfBoundsIsRefusedWithAWarningAndTheDefault) {
  icn::testing::installLogCapture();
  icn::testing::takeWarnings();
  struct Case {
    const char* name;
    Id id;
    const char* value;
    int64_t expect;
    bool warns;
  };
  const Case cases[] = {
      {"ICN_TCP_STREAMS", Id::TcpStreams, "17", 4, true},
      {"ICN_TCP_STREAMS", Id::TcpStreams, "-1", 4, true},
      {"ICN_TCP_STREAMS", Id::TcpStreams, "16", 16, false},
      {"ICN_TCP_STREAMS", Id::TcpStreams, "0", 0, false},
      {"ICN_IB_TIMEOUT", Id::IbTimeout, "0", 18, true},
      {"ICN_IB_TIMEOUT", Id::IbTimeout, "32", 18, true},
      {"ICN_TCP_CHUNK_BYTES", Id::TcpChunkBytes, "128", 131072, true},
      {"ICN_CONNECT_TIMEOUT_MS", Id::ConnectTimeoutMs, "99999999999999999999", 60000, true},  // past int64
      {"ICN_TUNER_QUIET_DUEL", Id::TunerQuietDuel, "0", 0, false},  // IntOrZero: 0 is off
      {"ICN_TUNER_QUIET_DUEL", Id::TunerQuietDuel, "3", 12, true},
      {"ICN_TUNER_QUIET_DUEL", Id::TunerQuietDuel, "4", 4, false},
      {"ICN_TUNER_QUIET_DUEL", Id::TunerQuietDuel, "33", 12, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.value);
    icn::testing::setEnvAndReload(c.name, c.value);
    EXPECT_EQ(getInt(c.id), c.expect);
    auto w = icn::testing::takeWarnings();
    if (c.warns) {
      EXPECT_TRUE(icn::testing::warned(w, {c.name, c.value})) << "no WARN naming the variable and its value";
      const bool range = icn::testing::warned(w, {rangeText(c.id).c_str()});
      const bool notInteger = icn::testing::warned(w, {"not an integer"});
      EXPECT_TRUE(range || notInteger) << "the WARN names neither the range nor why";
    } else {
      EXPECT_TRUE(w.empty()) << w.front();
    }
    icn::testing::setEnvAndReload(c.name, nullptr);
  }
}

TEST(Params, RangesReadAsTheReadmeShowsThem) {
  EXPECT_EQ(rangeText(Id::TcpStreams), "0..16");
  EXPECT_EQ(rangeText(Id::IbGidIndex), "-1..65535");
  EXPECT_EQ(rangeText(Id::TunerQuietDuel), "0, or 4..32");
  EXPECT_EQ(rangeText(Id::GdrFlushDisable), "0/1");
  EXPECT_EQ(rangeText(Id::Transport), "");
  static_assert(minOf(Id::TcpStreams) == 0 && maxOf(Id::TcpStreams) == 16);
  EXPECT_NE(markdownTable().find("| `ICN_TCP_STREAMS` | int | `4` | `0..16` |"), std::string::npos);
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
