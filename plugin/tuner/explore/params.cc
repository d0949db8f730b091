#include "tuner/explore/params.h"

#include <algorithm>

#include "core/log.h"
#include "core/params.h"

namespace icn::tuner {

// A quiet duel times the call that opens its ranked span and its last: it needs 4 calls at least.
static_assert(params::minOf(params::Id::TunerQuietDuel) >= 4);

ExploreParams exploreParamsFromSettings() {
  ExploreParams p;
  p.callsPerArm = static_cast<int>(params::getInt(params::Id::TunerExploreCalls));
  p.quietDuelCalls = static_cast<int>(params::getInt(params::Id::TunerQuietDuel));
  return p;
}

ExploreParams exploreParamsFor(ExploreParams p, int nNodes, bool everyCallTimed) {
  // Quiet duels only where communicators span nodes (NCCL counts the net path of one host as two nodes): there
  // profiling slows one arm far more than the others. On one node every duel call stays timed: those duels were
  // validated that way, and nccl-tests' switches between sizes cut quiet blocks short there.
  if (nNodes <= 1 || everyCallTimed) p.quietDuelCalls = 0;
  return acrossNodes(p, nNodes);
}

ExploreParams acrossNodes(ExploreParams p, int nNodes) {
  if (nNodes <= 1) return p;
  // A collective across nodes also waits for the network through NCCL's proxy thread, which kernel times do not
  // show reliably: only periods rank arms, and as a trimmed mean (periods there come in pairs, so a low quantile
  // undercounts). An arm's first calls after another arm run cheaper (part of a call's cost falls on the next
  // calls of the same connections), so each arm gets 3 screening calls with the first dropped, and a duel runs 8
  // calls per arm and ranks each on its latest 4. Network periods wander more than a GPU's, so long calls get no
  // smaller margin. Quiet duels rank a span over the latest 8 calls of a block: the climb is over by then, and the
  // timed last call's toll is shared by 8. (docs/readme/tuner.md, "Why the rules are what they are", has the
  // measurements.)
  p.hostBoundRatio = 0;
  p.meanPeriods = true;
  p.callsPerArm = std::max(p.callsPerArm, 3);
  p.dropFirstAfter = 1;
  p.duelCalls = std::max(p.duelCalls, 8);
  p.duelKeepCalls = 4;
  p.longCallMargin = p.ncclMargin;
  if (p.quietDuelCalls >= 4) p.quietSpanCalls = std::min(8, p.quietDuelCalls - 2);
  return p;
}

}  // namespace icn::tuner
