// The conformance suite's two ranks: the shared harness (test/pair) plus per-rank environment from
// ICN_CONF_RANK<n>_ENV and expectations about ranks that kill themselves on purpose.
#pragma once
#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pair_runner.h"

namespace icn::conformance {

using testpair::kWait;
using testpair::pluginPath;
using testpair::Rank;

struct RunOptions {
  std::chrono::seconds timeout{120};
  bool expectRank0Killed = false;  // rank 0 SIGKILLs itself on purpose
  bool expectRank1Killed = false;
  std::vector<std::pair<std::string, std::string>> env{};  // both ranks, after ICN_CONF_RANK<n>_ENV
};

// Returns after both ranks exited (killing them at the timeout), with their exit status and log; records gtest
// failures.
std::array<testpair::RankOutcome, 2> runTwoRanks(const std::function<void(Rank&)>& rank0, const std::function<void(Rank&)>& rank1,
                 RunOptions opts = {});

}  // namespace icn::conformance
