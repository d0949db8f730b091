#include "tuner/explore/bucket_log.h"

#include <cstdio>

#include "core/log.h"
#include "telemetry/coll_names.h"

namespace icn::tuner {

void logExploring(uint64_t commId, int c, int bkt, const Bucket& b, const ExploreParams& p, bool adaptive,
                  const SkipReport& skips) {
  int nCands = static_cast<int>(b.candidates().size());
  char first[48];
  char skipped[96] = "";
  if (skips.farSlower > 0)
    snprintf(skipped, sizeof skipped, "; %d more skipped: over %.0fx slower than the fastest at 2^%d B",
             skips.farSlower, skips.farSlowdown, skips.farFrom);
  char modelSkipped[160] = "";
  if (skips.slowLl > 0)
    snprintf(modelSkipped, sizeof modelSkipped, "; %d LL skipped: NCCL's model puts them over %.1fx its choice (%s)",
             skips.slowLl, skips.slowLlRatio, skips.slowLlList.data());
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: exploring %d candidates from %s, at most %d calls (%s)%s%s",
           static_cast<unsigned long long>(commId), coll::collName(c), bkt, nCands,
           describe(b.candidates()[0], first, sizeof first), BucketExplorer::stage1MaxCalls(nCands, p, adaptive),
           adaptive ? "screen + confirm" : "fixed plan, ranks in other processes", modelSkipped, skipped);
}

void logRoundEnd(uint64_t commId, int c, int bkt, const BucketExplorer& ex, const CommitInfo& ci, bool committed,
                 int minSamples, const char* whyKept) {
  char before[48], after[48];
  if (ci.notEnough) {
    ICN_INFO(subsys::Tuning,
             "tuner: comm 0x%llx %s 2^%d B %s: keeps %s: not enough measurements after %d planned calls "
             "(NCCL's choice and the leader need %d usable samples each); measured: %s",
             static_cast<unsigned long long>(commId), coll::collName(c), bkt, BucketExplorer::stageName(ci.stage),
             describe(ci.after, after, sizeof after), ci.calls, minSamples, ci.detail.c_str());
    return;
  }
  if (committed) {
    ICN_INFO(subsys::Tuning,
             "tuner: comm 0x%llx %s 2^%d B %s: %s %s %s (%.2fus) from call %llu after %d planned calls; "
             "ranked by %s; measured (period/kernel): %s",
             static_cast<unsigned long long>(commId), coll::collName(c), bkt, BucketExplorer::stageName(ci.stage),
             describe(ci.before, before, sizeof before), ci.before == ci.after ? "stays" : "->",
             describe(ci.after, after, sizeof after), ci.afterUs, static_cast<unsigned long long>(ex.currentFrom()),
             ci.calls, ci.hostBound ? "period (host-bound: the reference stays within 1.5x)" : "period",
             ci.detail.c_str());
    return;
  }
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: learned %s (%.2fus) but keeps %s: %s; measured: %s",
           static_cast<unsigned long long>(commId), coll::collName(c), bkt, describe(ex.learned(), after, sizeof after),
           ex.learnedUs(), describe(ci.after, before, sizeof before), whyKept, ci.detail.c_str());
}

void logQuietBlockCut(uint64_t commId, int c, int bkt, uint64_t index) {
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B duel: other sizes' calls came inside a quiet block at "
           "call %llu; its arm runs another block", static_cast<unsigned long long>(commId), coll::collName(c), bkt,
           static_cast<unsigned long long>(index));
}

void logDrift(uint64_t commId, int c, int bkt, const BucketExplorer& ex) {
  char cur[48];
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: measured times drifted from %.2fus for %s; re-exploring",
           static_cast<unsigned long long>(commId), coll::collName(c), bkt, ex.currentUs(),
           describe(ex.current(), cur, sizeof cur));
}

}  // namespace icn::tuner
