// The options and report every scale-up probe shares (icnprobe::ProbeCli): defaults, the size rounded to the
// probe's unit, bad values refused with exit code 2, and the JSON report the benchmark report tool reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "probe_util.h"

namespace {

bool parse(icnprobe::ProbeCli& cli, std::vector<std::string> args, size_t align, int* rc) {
  args.insert(args.begin(), "probe");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return cli.parse(static_cast<int>(argv.size()), argv.data(), align, rc);
}

icnprobe::ProbeCli makeCli() { return icnprobe::ProbeCli("icn-test-bw", "a test probe", "bytes per copy", "7"); }

}  // namespace

TEST(ProbeCli, DefaultsAndOwnOptions) {
  icnprobe::ProbeCli cli = makeCli();
  cli.options().add("lat_iters", "2000", "rounds");
  int rc = -1;
  ASSERT_TRUE(parse(cli, {"--lat_iters", "5"}, 1, &rc));
  EXPECT_EQ(cli.size, 256u << 20);
  EXPECT_EQ(cli.iters, 7);
  EXPECT_TRUE(cli.devices.empty()) << "no --devices: every device";
  EXPECT_EQ(cli.json, "");
  EXPECT_EQ(cli.options().integer("lat_iters"), 5);
}

TEST(ProbeCli, SizeIsRoundedDownToTheUnitAndDevicesAreAList) {
  icnprobe::ProbeCli cli = makeCli();
  int rc = -1;
  ASSERT_TRUE(parse(cli, {"--size=100", "--iters", "3", "--devices", "0-2,5"}, 16, &rc));
  EXPECT_EQ(cli.size, 96u);
  EXPECT_EQ(cli.iters, 3);
  EXPECT_EQ(cli.devices, (std::vector<int>{0, 1, 2, 5}));
}

TEST(ProbeCli, BadValuesExitWithTwo) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--size", "8"}, {"--size", "0"}, {"--iters", "0"},
                                        {"--bogus", "1"}, {"stray"}, {"--size"}}) {
    icnprobe::ProbeCli cli = makeCli();
    int rc = -1;
    EXPECT_FALSE(parse(cli, args, 16, &rc)) << args[0];
    EXPECT_EQ(rc, 2) << args[0];
  }
  icnprobe::ProbeCli cli = makeCli();
  int rc = -1;
  EXPECT_TRUE(parse(cli, {"--size", "8"}, 1, &rc)) << "8 bytes are enough for a probe without a unit";
}

TEST(ProbeCli, HelpExitsWithZero) {
  icnprobe::ProbeCli cli = makeCli();
  int rc = -1;
  EXPECT_FALSE(parse(cli, {"--help"}, 1, &rc));
  EXPECT_EQ(rc, 0);
}

TEST(ProbeCli, ReportIsOneJsonObjectWithTheCommonFields) {
  char path[] = "/tmp/icn-probe-cli-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  icnprobe::ProbeCli cli = makeCli();
  int rc = -1;
  ASSERT_TRUE(parse(cli, {"--size", "1K", "--json", path}, 1, &rc));
  std::string items;
  icnprobe::appendJsonItem(items, "{\"dev\":%d,\"note\":\"%s\"}", 0, icnprobe::jsonEscape("a \"b\"").c_str());
  icnprobe::appendJsonItem(items, "{\"dev\":%d,\"note\":\"%s\"}", 1, "");
  ASSERT_TRUE(cli.writeReport(",\"gpus\":[" + items + "]"));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  icn::json::Value v;
  std::string why;
  ASSERT_TRUE(icn::json::parse(text.str(), v, why)) << why << "\n" << text.str();
  EXPECT_EQ(text.str(),
            "{\"tool\":\"icn-test-bw\",\"size\":1024,\"iters\":7,"
            "\"gpus\":[{\"dev\":0,\"note\":\"a \\\"b\\\"\"},{\"dev\":1,\"note\":\"\"}]}\n");
}

TEST(ProbeCli, NoJsonFileWritesNothing) {
  icnprobe::ProbeCli cli = makeCli();
  int rc = -1;
  ASSERT_TRUE(parse(cli, {}, 1, &rc));
  EXPECT_TRUE(cli.writeReport(",\"gpus\":[]"));
}
