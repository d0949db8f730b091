// The channel count ICN asks NCCL for on a device over several rails (plugin/adapters/nccl_channels.h).
#include "adapters/nccl_channels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace icn::adapters {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> lookup() const {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(NcclChannels, TwoChannelsPerRailOfADeviceOverSeveralRails) {
  FakeEnv env;
  EXPECT_EQ(decideChannelAsk(2, 2, env.lookup()).minChannels, 4);
  EXPECT_EQ(decideChannelAsk(3, 2, env.lookup()).minChannels, 6);
  EXPECT_EQ(decideChannelAsk(4, 3, env.lookup()).minChannels, 12);
  EXPECT_EQ(decideChannelAsk(4, 16, env.lookup()).minChannels, 64);  // NCCL's most
}

TEST(NcclChannels, NothingForOneRailOrWhenTurnedOff) {
  FakeEnv env;
  EXPECT_EQ(decideChannelAsk(1, 2, env.lookup()).minChannels, 0);
  EXPECT_EQ(decideChannelAsk(0, 2, env.lookup()).minChannels, 0);
  const ChannelAsk off = decideChannelAsk(2, 0, env.lookup());
  EXPECT_EQ(off.minChannels, 0);
  EXPECT_NE(off.reason.find("ICN_TCP_CHANNELS_PER_RAIL=0"), std::string::npos);
}

TEST(NcclChannels, TheJobsOwnChannelSettingWins) {
  for (const char* var : kNcclChannelVars) {
    FakeEnv env;
    env.vars[var] = "2";
    const ChannelAsk a = decideChannelAsk(2, 2, env.lookup());
    EXPECT_EQ(a.minChannels, 0) << var;
    EXPECT_NE(a.reason.find(std::string(var) + "=2"), std::string::npos) << a.reason;
  }
  FakeEnv empty;
  empty.vars["NCCL_MIN_NCHANNELS"] = "";  // set but empty: NCCL reads no value either
  EXPECT_EQ(decideChannelAsk(2, 2, empty.lookup()).minChannels, 4);
}

TEST(NcclChannels, InitSetsTheVariableNcclReads) {
  for (const char* var : kNcclChannelVars) unsetenv(var);
  setenv("ICN_TCP_CHANNELS_PER_RAIL", "2", 1);  // read once, here (the default, 0, asks for nothing)
  askNcclForChannels(2, "eth0+eth1");
  const char* v = std::getenv("NCCL_MIN_NCHANNELS");
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v, "4");
}

}  // namespace
}  // namespace icn::adapters
