// The one place ExploreParams get their values beyond the defaults (explorer.h): the user's settings, then the
// rules for a communicator's shape.
#pragma once
#include "tuner/explore/explorer.h"

namespace icn::tuner {

// ICN_TUNER_EXPLORE_CALLS and ICN_TUNER_QUIET_DUEL over the defaults; an out-of-range value is reported and
// replaced by its default. quietDuelCalls is the value for communicators spanning nodes (exploreParamsFor).
ExploreParams exploreParamsFromSettings();

// The parameters the plugin explores a communicator of `nNodes` nodes with. `everyCallTimed`: the user asked for
// every collective timed (ICN_HEATMAP_FILE), so no call may go untimed.
ExploreParams exploreParamsFor(ExploreParams p, int nNodes, bool everyCallTimed);

// The part of exploreParamsFor for communicators spanning nodes (the group simulator applies it alone, so its
// one-node runs may still try quiet duels).
ExploreParams acrossNodes(ExploreParams p, int nNodes);

}  // namespace icn::tuner
