#include "two_ranks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstdlib>
#include <sstream>

namespace icn::conformance {
namespace {

// Per-rank environment, e.g. ICN_CONF_RANK0_ENV="ICN_IB_HCA=rxe0" in the Soft-RoCE VM: the same
// suite then runs each rank on its own device.
testpair::RankSetup setupFromEnv(int rank) {
  testpair::RankSetup s;
  std::string var = "ICN_CONF_RANK" + std::to_string(rank) + "_ENV";
  const char* spec = getenv(var.c_str());
  if (!spec) return s;
  std::istringstream in(spec);
  std::string kv;
  while (in >> kv) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) s.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return s;
}

}  // namespace

std::array<testpair::RankOutcome, 2> runTwoRanks(const std::function<void(Rank&)>& rank0,
                                                 const std::function<void(Rank&)>& rank1, RunOptions opts) {
  std::array<testpair::RankSetup, 2> setup{setupFromEnv(0), setupFromEnv(1)};
  for (auto& s : setup) s.env.insert(s.env.end(), opts.env.begin(), opts.env.end());
  auto out = testpair::runPair(rank0, rank1, setup, opts.timeout);
  bool killedOk[2] = {opts.expectRank0Killed, opts.expectRank1Killed};
  for (int r = 0; r < 2; r++) {
    if (out[r].hung) continue;  // already reported by runPair
    int st = out[r].status;
    if (killedOk[r]) {
      EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "rank " << r << " should have been killed";
      continue;
    }
    EXPECT_TRUE(out[r].cleanExit()) << "rank " << r << " failed (exit " << (WIFEXITED(st) ? WEXITSTATUS(st) : -1)
                                    << ", signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << ")";
  }
  return out;
}

}  // namespace icn::conformance
