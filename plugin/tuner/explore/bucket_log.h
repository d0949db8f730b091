// The tuner's INFO lines about one bucket: what it explores, what a round decided, a quiet block cut short and a
// drift. Formatting only; the group decides when they are due.
#pragma once
#include <array>
#include <cstdint>

#include "tuner/explore/bucket.h"

namespace icn::tuner {

// Candidates the group left out of a bucket's first round, for the "exploring" line.
struct SkipReport {
  int slowLl = 0;                     // LL arms NCCL's own model puts far above its choice ...
  std::array<char, 80> slowLlList{};  // ... "RING/LL 2.0x TREE/LL 3.8x"
  double slowLlRatio = 0;             // ... by over this factor
  int farSlower = 0;                  // arms far slower in the nearest smaller measured bucket ...
  int farFrom = -1;                   // ... this one ...
  double farSlowdown = 0;             // ... by over this factor
};

void logExploring(uint64_t commId, int coll, int bucket, const Bucket& b, const ExploreParams& p, bool adaptive,
                  const SkipReport& skips);
// `whyKept`: why a winner that was not committed does not apply (ranks in other processes, static mode).
void logRoundEnd(uint64_t commId, int coll, int bucket, const BucketExplorer& ex, const CommitInfo& ci,
                 bool committed, int minSamples, const char* whyKept);
// Other buckets' calls came inside a quiet duel block (at call `index`): its arm runs another block.
void logQuietBlockCut(uint64_t commId, int coll, int bucket, uint64_t index);
// A settled bucket's measured times drifted: it explores again.
void logDrift(uint64_t commId, int coll, int bucket, const BucketExplorer& ex);

}  // namespace icn::tuner
