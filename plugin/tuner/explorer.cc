#include "tuner/explorer.h"

#include <algorithm>
#include <cstdio>

namespace icn::tuner {

// A different channel count must beat NCCL's by this much: channel effects are small and medians of a handful of
// samples are noisy, so smaller "wins" are mostly noise.
constexpr double kChannelWinRatio = 0.92;

double BucketExplorer::Bin::median() const {
  size_t n = std::min<size_t>(this->n, kRecent);
  if (n == 0) return 0;
  std::array<float, kRecent> tmp = recent;
  std::nth_element(tmp.begin(), tmp.begin() + n / 2, tmp.begin() + n);
  double hi = tmp[n / 2];
  if (n % 2) return hi;
  double lo = *std::max_element(tmp.begin(), tmp.begin() + n / 2);
  return (lo + hi) / 2;
}

void BucketExplorer::settle(const Decision& d, uint64_t from, double refUs) {
  base_ = phase_ == Phase::Settled ? current_ : base_;
  nScheduled_ = 0;
  nBins_ = 0;
  current_ = d;
  currentFrom_ = from;
  currentUs_ = refUs;
  phase_ = Phase::Settled;
  stage_ = 0;
  driftN_ = driftHits_ = 0;
}

void BucketExplorer::beginStage1(std::span<const Decision> candidates, uint64_t start, int callsPerArm) {
  base_ = phase_ == Phase::Settled ? current_ : Decision{};
  nBins_ = 0;
  for (const Decision& d : candidates) {
    if (nBins_ == kMaxArms) break;
    bins_[nBins_++] = Bin{d};
  }
  firstScheduled_ = 0;
  nScheduled_ = nBins_;
  start_ = start;
  perArm_ = std::max(1, callsPerArm);
  phase_ = Phase::Exploring;
  stage_ = 1;
}

Decision BucketExplorer::decisionFor(uint64_t index) const {
  if (phase_ == Phase::Unseen) return Decision{};
  if (phase_ == Phase::Settled && index >= currentFrom_) return current_;
  if (index < start_ || nScheduled_ == 0) return base_;
  uint64_t k = (index - start_) / static_cast<uint64_t>(perArm_);
  if (k < static_cast<uint64_t>(nScheduled_)) return bins_[firstScheduled_ + k].d;
  return base_;
}

int BucketExplorer::findBin(const Sample& s) const {
  for (int i = 0; i < nBins_; ++i) {
    const Bin& b = bins_[i];
    if (b.d.algo != s.algo || b.d.proto != s.proto) continue;
    if (stage_ != 2) return i;
    int rel = s.channels < baseChannels_ ? -1 : s.channels > baseChannels_ ? 1 : 0;
    if (b.chRel == rel) return i;
  }
  return -1;
}

bool BucketExplorer::addSample(const Sample& s) {
  if (phase_ == Phase::Exploring) {
    int i = findBin(s);
    if (i < 0) return false;
    Bin& b = bins_[i];
    b.recent[b.n % kRecent] = static_cast<float>(s.us);
    b.n++;
    b.chSeen = s.channels;
    return true;
  }
  if (phase_ != Phase::Settled || currentUs_ <= 0 || s.algo != current_.algo || s.proto != current_.proto)
    return false;
  if (current_.channels > 0 ? s.channels > current_.channels : (baseChannels_ > 0 && s.channels != baseChannels_))
    return false;
  driftBuf_[driftN_ % driftBuf_.size()] = static_cast<float>(s.us);
  driftN_++;
  return true;
}

bool BucketExplorer::roundDone(uint64_t issued, const ExploreParams& p) const {
  if (phase_ != Phase::Exploring) return false;
  bool all = true;
  for (int i = 0; i < nBins_; ++i)
    if (bins_[i].n < static_cast<uint32_t>(std::max(1, p.minSamples))) all = false;
  return all || issued >= scheduleEnd() + static_cast<uint64_t>(std::max(0, p.timeoutCalls));
}

CommitInfo BucketExplorer::finishRound(uint64_t effectiveFrom, bool mayCommit) {
  CommitInfo info;
  info.stage = stage_;
  info.before = base_;
  int win = -1;
  double winUs = 0;
  char buf[96], name[48];
  for (int i = 0; i < nBins_; ++i) {
    const Bin& b = bins_[i];
    Decision shown = b.d;
    if (stage_ == 2 && b.chRel == 0 && b.chSeen > 0) shown.channels = static_cast<int16_t>(b.chSeen);
    if (b.n == 0) {
      snprintf(buf, sizeof buf, "%s%s -", info.detail.empty() ? "" : " ", describe(shown, name, sizeof name));
    } else {
      snprintf(buf, sizeof buf, "%s%s %.2fus(%u)", info.detail.empty() ? "" : " ", describe(shown, name, sizeof name),
               b.median(), b.n);
    }
    info.detail += buf;
    if (b.n == 0) continue;
    double m = b.median();
    if (win < 0 || m < winUs) {
      win = i;
      winUs = m;
    }
  }
  if (stage_ == 2 && win >= 0 && bins_[win].chRel != 0 && bins_[0].n > 0 && winUs > kChannelWinRatio * bins_[0].median()) {
    win = 0;  // a different channel count must win clearly, not by noise
    winUs = bins_[0].median();
  }
  Decision winner = win >= 0 ? bins_[win].d : base_;
  if (win >= 0) {
    learned_ = winner;
    learnedUs_ = winUs;
    learnedSamples_ = bins_[win].n;
    if (stage_ == 1) baseChannels_ = bins_[win].chSeen;
  }
  Decision applied = (mayCommit && win >= 0) ? winner : base_;
  info.after = applied;
  info.afterUs = win >= 0 ? winUs : 0;
  current_ = applied;
  currentFrom_ = effectiveFrom;
  currentUs_ = (mayCommit && win >= 0) ? winUs : 0;  // no drift watching without a measured reference
  phase_ = Phase::Settled;
  driftN_ = driftHits_ = 0;
  return info;
}

bool BucketExplorer::beginStage2(uint64_t start, int callsPerArm) {
  if (phase_ != Phase::Settled || stage_ != 1 || current_.algo < 0 || baseChannels_ <= 0) return false;
  int win = -1;
  for (int i = 0; i < nBins_; ++i)
    if (bins_[i].d == current_) win = i;
  if (win < 0) return false;
  Bin keep = bins_[win];  // stage-1 samples of the winner serve as the "same channels" arm
  keep.chRel = 0;
  nBins_ = 0;
  bins_[nBins_++] = keep;
  int D = baseChannels_;
  if (D / 2 >= 1 && D / 2 < D) {
    Bin b{current_};
    b.d.channels = static_cast<int16_t>(D / 2);
    b.chRel = -1;
    bins_[nBins_++] = b;
  }
  if (2 * D <= 64) {
    Bin b{current_};
    b.d.channels = static_cast<int16_t>(2 * D);
    b.chRel = 1;
    bins_[nBins_++] = b;
  }
  if (nBins_ == 1) return false;
  base_ = current_;
  firstScheduled_ = 1;
  nScheduled_ = nBins_ - 1;
  start_ = start;
  perArm_ = std::max(1, callsPerArm);
  phase_ = Phase::Exploring;
  stage_ = 2;
  return true;
}

bool BucketExplorer::driftDetected(const ExploreParams& p) {
  if (phase_ != Phase::Settled || currentUs_ <= 0) return false;
  int w = std::clamp(p.driftWindow, 2, static_cast<int>(driftBuf_.size()));
  if (driftN_ < w) return false;
  std::array<float, 64> tmp = driftBuf_;
  std::nth_element(tmp.begin(), tmp.begin() + w / 2, tmp.begin() + w);
  double med = tmp[w / 2];
  driftN_ = 0;
  if (med > currentUs_ * p.driftRatio && med - currentUs_ > p.driftMinUs) {
    driftHits_++;
  } else {
    driftHits_ = 0;
  }
  if (driftHits_ >= std::max(1, p.driftWindows) && reexplores_ < p.maxReexplores) {
    driftHits_ = 0;
    return true;
  }
  return false;
}

}  // namespace icn::tuner
