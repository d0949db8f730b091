// The reliability suite runs its two ranks with the shared harness (test/pair).
#pragma once
#include "pair_runner.h"

namespace icn::rel {
using testpair::Body;
using testpair::kWait;
using testpair::openFds;
using testpair::pluginPath;
using testpair::Rank;
using testpair::RankOutcome;
using testpair::RankSetup;
using testpair::rssKiB;
using testpair::runPair;
}  // namespace icn::rel
