// BucketExplorer's estimates and ranking: what each arm's samples say it costs, whether a round is host-bound,
// and which arm leads. Separate from the plan and round bookkeeping in explorer.cc.
#include <algorithm>
#include <cmath>

#include "tuner/explore/explorer.h"

namespace icn::tuner {

// A different channel count must beat NCCL's by this much: channel effects are small and estimates from a handful
// of samples are noisy, so smaller "wins" are mostly noise.
constexpr double kChannelWinRatio = 0.92;
// A channel variant that wins by period may not have a kernel longer than this x the base's.
constexpr double kChannelKernelSlack = 1.02;

double BucketExplorer::estimate(const float* v, int n, int drop, bool mean) {
  if (n <= 0) return 0;
  int d = std::clamp(drop, 0, std::max(0, n - 2));  // keep at least two samples
  std::array<float, kRecent> tmp{};
  int m = std::min(n - d, kRecent);
  std::copy(v + d, v + d + m, tmp.begin());
  if (mean) {
    // Mean without the extremes: consecutive periods may alternate short and long (two calls completing
    // together), and only their mean is the cost per call; dropping as many of the largest as of the smallest
    // samples (a quarter each: the interquartile mean) keeps outliers out without biasing an alternating pair.
    std::sort(tmp.begin(), tmp.begin() + m);
    int trim = m >= 4 ? m / 4 : 0;
    int lo = trim, hi = m - trim;
    double sum = 0;
    for (int i = lo; i < hi; ++i) sum += tmp[i];
    return sum / (hi - lo);
  }
  int k = (m - 1) / 4;  // lower quartile: launch skew and interference only ever add time
  std::nth_element(tmp.begin(), tmp.begin() + k, tmp.begin() + m);
  return tmp[k];
}

uint32_t BucketExplorer::dropFirst(uint32_t n) const {
  // The first call's samples (one per local rank) are dropped once `dropFirstAfter` more calls were measured;
  // with less, every sample counts (the low quantile already ignores one slow outlier).
  uint32_t spc = static_cast<uint32_t>(spc_);
  return n >= static_cast<uint32_t>(1 + std::max(1, p_.dropFirstAfter)) * spc ? spc : 0;
}

uint32_t BucketExplorer::dropHeld(const Bin& b) const {
  uint32_t held = std::min<uint32_t>(b.n, kRecent);
  // A duel with duelKeepCalls ranks each arm on its latest calls: across nodes an arm's calls get dearer over
  // several calls back to back, so its first calls after a switch flatter it (measurements: docs/readme/tuner.md).
  uint32_t keep = stage_ == kDuel ? static_cast<uint32_t>(std::max(0, p_.duelKeepCalls) * spc_) : 0;
  if (keep > 0 && b.n > keep) return held - std::min(keep, held);
  return b.n <= static_cast<uint32_t>(kRecent) ? dropFirst(b.n) : 0;  // wrapped: the first samples are gone
}

double BucketExplorer::ringEstimate(const std::array<float, kRecent>& ring, uint32_t n, uint32_t drop, bool mean) {
  if (n == 0) return 0;
  if (n <= static_cast<uint32_t>(kRecent))
    return estimate(ring.data(), static_cast<int>(n), static_cast<int>(drop), mean);
  // The ring wrapped: pass it oldest first.
  std::array<float, kRecent> ordered{};
  size_t head = n % kRecent;
  for (size_t i = 0; i < kRecent; ++i) ordered[i] = ring[(head + i) % kRecent];
  return estimate(ordered.data(), kRecent, static_cast<int>(drop), mean);
}

namespace {
// The least of a block's spans (one per local rank, over the same calls): launch skew and a slow call seen by one
// rank only ever add time. 0 when some span lacks the value.
double leastOf(const float* v, uint32_t n) {
  double least = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (v[i] <= 0) return 0;
    least = i == 0 ? v[i] : std::min<double>(least, v[i]);
  }
  return least;
}
}  // namespace

double BucketExplorer::binEstimate(const Bin& b) const {
  if (spanRanked()) return leastOf(b.span.data(), std::min<uint32_t>(b.nSpan, kRecent));
  return ringEstimate(b.recent, b.n, dropHeld(b), p_.meanPeriods);
}

double BucketExplorer::kernelEstimate(const Bin& b) const {
  if (spanRanked()) return leastOf(b.spanKernel.data(), std::min<uint32_t>(b.nSpan, kRecent));
  return b.kernelMissing > 0 ? 0 : ringEstimate(b.recentKernel, b.n, dropHeld(b), false);
}

bool BucketExplorer::hostBound() const {
  if (p_.hostBoundRatio <= 0) return false;
  double minK = 0, minP = 0;
  bool any = false;
  for (int i = 0; i < nBins_; ++i) {
    const Bin& b = bins_[i];
    if (!measured(b)) continue;
    double k = kernelEstimate(b);
    if (k <= 0) return false;  // some arm has no kernel times: periods are all we can compare
    double per = binEstimate(b);
    minK = any ? std::min(minK, k) : k;
    minP = any ? std::min(minP, per) : per;
    any = true;
  }
  // Compared with the best period, not the fastest kernel's own: an arm with a short kernel but a long period
  // (per-call costs outside the kernel) does not make the round host-bound.
  return any && minK < p_.hostBoundRatio * minP;
}

uint32_t BucketExplorer::usable(const Bin& b) const {
  if (spanRanked()) return std::min<uint32_t>(b.nSpan, kRecent);
  return std::min<uint32_t>(b.n, kRecent) - dropHeld(b);
}

int BucketExplorer::armEstimates(std::array<ArmEstimate, kMaxArms>& out) const {
  std::array<double, kMaxArms> period{};
  double fastest = 0;
  periodEstimates(period, fastest);
  for (int i = 0; i < nBins_; ++i)
    out[i] = ArmEstimate{bins_[i].d, static_cast<float>(period[i]),
                         static_cast<uint16_t>(period[i] > 0 ? usable(bins_[i]) : 0)};
  return nBins_;
}

int BucketExplorer::periodEstimates(std::array<double, kMaxArms>& period, double& fastestUs) const {
  int fastest = -1;
  fastestUs = 0;
  for (int i = 0; i < nBins_; ++i) {
    period[i] = 0;
    if (!measured(bins_[i])) continue;
    period[i] = binEstimate(bins_[i]);
    if (fastest < 0 || period[i] < fastestUs) {
      fastest = i;
      fastestUs = period[i];
    }
  }
  return fastest;
}

int BucketExplorer::leader(bool hostBound) const {
  std::array<double, kMaxArms> period{};  // each arm's estimate, read once (0: unmeasured)
  double winUs = 0;
  int win = periodEstimates(period, winUs);
  if (win < 0) return win;
  // The reference a new choice must beat: NCCL's own (stage 1, duel) or the unchanged channel count (stage 2); in
  // a host-bound duel without NCCL's choice, the stage-1 winner.
  int ref = stage_ == kChannels ? 0 : ncclPick_;
  if (ref < 0 && hostBound && stage_ == kDuel)
    for (int i = 0; i < nBins_; ++i)
      if (bins_[i].d == base_) ref = i;
  if (ref < 0 || !measured(bins_[ref]) || win == ref) return sameAlgoShorterKernel(win, period.data(), winUs);
  double refUs = period[ref];
  // Host-bound, every arm's loop runs at the host's pace, and the periods measured (the profiler's own host work
  // included) cannot resolve what separates the arms: the reference stays unless its period is clearly worse.
  // There every choice costs about the same per call, and ranking by kernel time instead picks arms slower a call,
  // most where a short kernel hides a long call (measurements: docs/readme/tuner.md).
  if (hostBound) {
    if (refUs <= p_.hostTieRatio * winUs) return sameAlgoShorterKernel(ref, period.data(), winUs);
    // The reference is clearly slower; among the arms the host's pace hides alike, the shortest kernel.
    double bestK = 0;
    for (int i = 0; i < nBins_; ++i) {
      double k = measured(bins_[i]) ? kernelEstimate(bins_[i]) : 0;
      if (k > 0 && period[i] <= p_.hostTieRatio * winUs && (bestK == 0 || k < bestK)) {
        bestK = k;
        win = i;
      }
    }
    winUs = period[win];
  }
  if (stage_ == kChannels) {
    if (win == ref || bins_[win].chRel == 0 || winUs > kChannelWinRatio * refUs) return ref;  // clearly, not by noise
    // Fewer channels must not cost a longer kernel either: while it measures, the profiler adds host work per
    // channel, so a variant with fewer channels can show a shorter period only because the host kept up better
    // while the variant itself runs slower unprofiled (measurements: docs/readme/tuner.md).
    double kWin = kernelEstimate(bins_[win]), kRef = kernelEstimate(bins_[ref]);
    if (kWin > 0 && kRef > 0 && kWin > kChannelKernelSlack * kRef) return ref;
    return win;
  }
  // Leaving NCCL's own choice must pay: a few samples cannot resolve a difference of a few percent, except on long
  // GPU-bound calls, whose samples are steady enough for longCallMargin (measurements: docs/readme/tuner.md).
  double margin = p_.longCallUs > 0 && refUs >= p_.longCallUs ? std::min(p_.ncclMargin, p_.longCallMargin)
                                                               : p_.ncclMargin;
  int pick = ref != ncclPick_ || (win != ref && winUs <= (1.0 - margin) * refUs) ? win : ref;
  return sameAlgoShorterKernel(pick, period.data(), winUs);
}

int BucketExplorer::sameAlgoShorterKernel(int pick, const double* period, double bestUs) const {
  // Within one algorithm the per-call cost outside the kernel is about the same for every protocol, so where
  // periods cannot rank arms (the host's pace while the profiler measures) a clearly shorter kernel still decides.
  // Across algorithms kernels mislead (a short Tree kernel can hide a long call), and across nodes they miss the
  // network (hostBoundRatio 0 there); stage 2 compares channel counts. Measurements: docs/readme/tuner.md.
  if (pick < 0 || p_.hostBoundRatio <= 0 || stage_ == kChannels) return pick;
  double pickK = kernelEstimate(bins_[pick]);
  int best = pick;
  double bestK = pickK;
  for (int i = 0; pickK > 0 && i < nBins_; ++i) {
    if (i == pick || !measured(bins_[i]) || bins_[i].d.algo != bins_[pick].d.algo) continue;
    if (period[i] > p_.hostTieRatio * bestUs) continue;
    double k = kernelEstimate(bins_[i]);
    if (k > 0 && k < bestK && k <= pickK * kSameAlgoKernelRatio && k <= pickK - kSameAlgoKernelMinUs) {
      best = i;
      bestK = k;
    }
  }
  return best;
}

}  // namespace icn::tuner
