#include "tuner/explore/explorer.h"

#include <algorithm>
#include <cstdio>

namespace icn::tuner {

bool BucketExplorer::spanRanked() const {
  if (!quiet_ || nBins_ == 0) return false;
  for (int i = 0; i < nBins_; ++i)
    if (bins_[i].nSpan == 0) return false;
  return true;
}

uint64_t BucketExplorer::blockLen() const {
  return static_cast<uint64_t>(std::max(1, quiet_ ? p_.quietDuelCalls : p_.duelCalls));
}

uint64_t BucketExplorer::spanLen() const {
  uint64_t len = blockLen();
  return p_.quietSpanCalls > 0 ? std::clamp<uint64_t>(static_cast<uint64_t>(p_.quietSpanCalls), 2, len - 1) : len - 1;
}

bool BucketExplorer::measures(uint64_t index) const {
  if (!quietDuel() || index < start_) return true;
  uint64_t o = index - start_, len = blockLen();
  if (o >= len * static_cast<uint64_t>(nBlocks_)) return true;  // after the blocks: the winner runs timed
  uint64_t pos = o % len;
  return pos == len - 1 || pos == len - 1 - spanLen();
}

bool BucketExplorer::noteInterrupted(uint64_t index, uint64_t upTo) {
  if (!quietDuel() || index <= start_) return false;
  uint64_t o = index - start_, len = blockLen();
  uint64_t k = o / len, pos = o % len;
  // The span runs from the end of the call at len-1-span to the end of the last: a gap before any of its calls
  // but the first puts foreign calls inside it.
  if (k >= static_cast<uint64_t>(nBlocks_) || pos <= len - 1 - spanLen() || blockSpoiled_[k]) return false;
  blockSpoiled_[k] = true;
  int arm = blockArm_[k];
  // Ranks may already hold the winner for calls after a finished plan: pad with the winner's blocks up to `upTo`.
  int winner = nBins_ - 1;
  uint64_t blocksTo = (upTo > start_ ? upTo - start_ + len - 1 : 0) / len;
  int pad = planFinal_ ? static_cast<int>(std::max<uint64_t>(blocksTo, static_cast<uint64_t>(nBlocks_)) - nBlocks_) : 0;
  if (nBlocks_ + pad + 1 > kMaxBlocks || (nBlocks_ + pad + 1) * static_cast<int>(len) > kMaxPlan) return false;
  for (int i = 0; i < pad; ++i) {
    blockSpoiled_[nBlocks_] = false;
    blockArm_[nBlocks_++] = static_cast<int8_t>(winner);
  }
  blockSpoiled_[nBlocks_] = false;
  blockArm_[nBlocks_++] = static_cast<int8_t>(arm);
  planFinal_ = false;
  return true;
}

const char* BucketExplorer::stageName(int stage) {
  switch (stage) {
    case kScreen: return "stage 1";
    case kChannels: return "stage 2";
    case kDuel: return "duel";
    default: return "stage ?";
  }
}

uint32_t BucketExplorer::needSamples(int bin) const {
  // minSamples, or all an arm's calls can give when the plan gives it fewer (ICN_TUNER_EXPLORE_CALLS=1, one rank).
  // Stage 2's reference (bin 0) was measured in stage 1. One span already averages a block.
  if (spanRanked()) return 1;
  int calls = stage_ == kChannels && bin != 0 ? p_.channelCalls : stage_ == kDuel ? p_.duelCalls : p_.callsPerArm;
  return static_cast<uint32_t>(std::clamp(p_.minSamples, 1, std::max(1, calls * spc_)));
}

bool BucketExplorer::confident(int win) const {
  if (win < 0 || win >= nBins_) return false;
  // A quiet duel's timed calls alone are each block's first (the switch) and last: not a ranking.
  if (quiet_ && !spanRanked()) return false;
  if (usable(bins_[win]) < needSamples(win)) return false;
  int ref = stage_ == kChannels ? 0 : ncclPick_;
  if (ref >= 0 && ref != win) return usable(bins_[ref]) >= needSamples(ref);
  if (stage_ == kChannels) return true;  // keeping the stage-1 winner's channel count needs no comparison
  // NCCL's choice won (or is unknown): it only won if it was compared with at least one other measured arm.
  for (int i = 0; i < nBins_; ++i)
    if (i != win && usable(bins_[i]) >= needSamples(i)) return true;
  return false;
}

bool BucketExplorer::enoughAfterGrace() const {
  // Stage 2 only waits for the unchanged channel count: NCCL may not honour a channel variant (tiny sizes run on
  // one channel whatever we ask), so its samples may never come; an unmeasured variant just cannot win. A duel
  // waits for all but one call's samples of every block: the first samples to arrive are a block's first calls,
  // the ones that follow a switch, which can cost less than calls back to back (measurements: docs/readme/tuner.md).
  if (quiet_) return spanRanked();
  int n = stage_ == kChannels ? std::min(nBins_, 1) : nBins_;
  for (int i = 0; i < n; ++i) {
    const Bin& b = bins_[i];
    int calls = static_cast<int>(b.planned) - static_cast<int>(b.unmeasured);
    if (calls > 0 && usable(b) < needSamples(i)) return false;
    if (stage_ == kDuel && calls > 1 && b.n < static_cast<uint32_t>(calls - 1) * static_cast<uint32_t>(spc_))
      return false;
  }
  return true;
}

int BucketExplorer::stage1MaxCalls(int nCands, const ExploreParams& p, bool adaptive) {
  int warm = std::max(0, p.warmCalls);
  int screen = std::max(1, p.callsPerArm);
  int confirm = std::max(0, p.confirmCalls);
  if (!adaptive) return warm + nCands * (screen + confirm);
  return warm + nCands * screen + confirm * std::clamp(p.finalists, 0, nCands) + confirm;
}

void BucketExplorer::settle(const Decision& d, uint64_t from, double refUs) {
  base_ = phase_ == Phase::Settled ? current_ : base_;
  nBins_ = 0;
  planLen_ = 0;
  planFinal_ = true;
  tail_ = d;
  current_ = d;
  currentFrom_ = from;
  currentUs_ = refUs;
  phase_ = Phase::Settled;
  stage_ = 0;
  quiet_ = false;
  driftN_ = driftHits_ = 0;
}

void BucketExplorer::startRound(uint64_t start) {
  start_ = start;
  planLen_ = 0;
  planFinal_ = false;
  tail_ = base_;
  confirms_ = 0;
  for (int i = 0; i < nBins_; ++i) {
    bins_[i].planned = 0;
    bins_[i].unmeasured = 0;
    bins_[i].confirms = 0;
  }
  phase_ = Phase::Exploring;
}

void BucketExplorer::beginStage1(std::span<const Decision> candidates, uint64_t start, const ExploreParams& p,
                                 bool adaptive, int samplesPerCall, int ncclPick) {
  p_ = p;
  adaptive_ = adaptive;
  spc_ = std::max(1, samplesPerCall);
  base_ = phase_ == Phase::Settled ? current_ : Decision{};
  nBins_ = 0;
  for (const Decision& d : candidates) {
    if (nBins_ == kMaxArms) break;
    bins_[nBins_++] = Bin{d};
  }
  ncclPick_ = ncclPick >= 0 && ncclPick < nBins_ ? ncclPick : -1;
  stage_ = kScreen;
  quiet_ = false;
  startRound(start);
}

int BucketExplorer::nextArm() {
  if (stage_ == kDuel) {
    // One block per arm, in bin order (the winner's last), then re-runs of interrupted quiet blocks.
    int k = planLen_ / static_cast<int>(blockLen());
    return k < nBlocks_ ? blockArm_[k] : -1;
  }
  if (stage_ == kChannels) {
    int per = std::max(1, p_.channelCalls);
    int k = planLen_ / per;
    return k + 1 < nBins_ ? k + 1 : -1;
  }
  int warm = std::max(0, p_.warmCalls);
  if (planLen_ < warm) return kWarm;
  int screen = std::max(1, p_.callsPerArm) + (adaptive_ ? 0 : std::max(0, p_.confirmCalls));
  if (planLen_ - warm < nBins_ * screen) return (planLen_ - warm) / screen;
  if (!adaptive_) return -1;
  // Confirm calls are handed out one at a time, each to the best measured arm that still may take one: estimates
  // are read now, so an arm whose screening samples were still in flight a call ago can still make it.
  int perArm = std::max(0, p_.confirmCalls);
  int lead = leader(hostBound());
  if (lead < 0 || perArm == 0) return -1;
  // The budget is perArm x finalists; a leader that has not been confirmed yet (its screening samples came late)
  // may still take its share on top: the winner should never rest on its screening samples alone.
  bool leaderShort = bins_[lead].confirms < perArm;
  if (confirms_ >= perArm * std::max(0, p_.finalists) && !leaderShort) return -1;
  if (confirms_ >= perArm * std::max(0, p_.finalists)) {
    bins_[lead].confirms++;
    ++confirms_;
    return lead;
  }
  double leadUs = binEstimate(bins_[lead]);
  int pick = -1;
  double pickUs = 0;
  for (int i = 0; i < nBins_; ++i) {
    const Bin& b = bins_[i];
    if (b.confirms >= perArm || b.n == 0) continue;
    double us = binEstimate(b);
    if (pick < 0 || us < pickUs) {
      pick = i;
      pickUs = us;
    }
  }
  if (pick < 0 || (pick != lead && pickUs > leadUs * p_.keepRatio)) return -1;  // the rest is clearly slower
  bins_[pick].confirms++;
  ++confirms_;
  return pick;
}

void BucketExplorer::extendPlan(uint64_t upTo) {
  if (phase_ != Phase::Exploring) return;
  while (!planFinal_ && planEnd() < upTo) {
    int arm = planLen_ < kMaxPlan ? nextArm() : -1;
    if (arm == kWarm) {
      plan_[planLen_++] = -1;
      continue;
    }
    if (arm < 0) {
      planFinal_ = true;
      int lead = (stage_ == kScreen && adaptive_) ? leader(hostBound()) : -1;
      // Until the round ends, the leader so far runs (adaptive) or the base does (fixed plans: what every
      // process computes without measurements). A leader that only won because the others' samples are still in
      // flight is no leader: the base runs then.
      tail_ = confident(lead) ? bins_[lead].d : base_;
      break;
    }
    plan_[planLen_++] = static_cast<int8_t>(arm);
    bins_[arm].planned++;
  }
}

void BucketExplorer::noteUnmeasured(uint64_t index) {
  if (phase_ != Phase::Exploring || index < start_ || index - start_ >= static_cast<uint64_t>(planLen_)) return;
  if (plan_[index - start_] >= 0) bins_[plan_[index - start_]].unmeasured++;
}

Decision BucketExplorer::decisionFor(uint64_t index) const {
  if (phase_ == Phase::Unseen) return Decision{};
  if (phase_ == Phase::Settled && index >= currentFrom_) return current_;
  if (index < start_) return base_;
  uint64_t o = index - start_;
  if (o < static_cast<uint64_t>(planLen_)) return plan_[o] >= 0 ? bins_[plan_[o]].d : base_;
  return planFinal_ ? tail_ : base_;
}

int BucketExplorer::findBin(const Sample& s) const {
  for (int i = 0; i < nBins_; ++i) {
    const Bin& b = bins_[i];
    if (b.d.algo != s.algo || b.d.proto != s.proto) continue;
    if (stage_ != kChannels) return i;
    int rel = s.channels < baseChannels_ ? -1 : s.channels > baseChannels_ ? 1 : 0;
    if (b.chRel == rel) return i;
  }
  return -1;
}

bool BucketExplorer::addSample(const Sample& s, uint64_t issued) {
  if (s.calls > 1 && !quietDuel()) return false;  // spans only rank a quiet duel
  if (phase_ == Phase::Exploring) {
    int i = findBin(s);
    if (i < 0) return false;
    if (stage_ == kDuel) {
      // Calls from before the duel, measured late, must not count as the block's (its first calls would no longer
      // be the ones dropped, and the round would stop waiting too early): a block's samples can only come once it
      // was issued, and each local rank completes its calls in order, so after a sample of the block before it.
      uint64_t block = blockLen();
      uint64_t blockStart = start_ + static_cast<uint64_t>(i) * block;
      if (s.calls > 1) {
        // A quiet block's span: from its first call's end to its last call's, once the last was issued.
        if (s.calls != static_cast<int>(spanLen()) || issued < blockStart + block) return false;
        Bin& b = bins_[i];
        b.span[b.nSpan % kRecent] = static_cast<float>(s.us);
        b.spanKernel[b.nSpan % kRecent] = static_cast<float>(s.kernelUs > 0 ? s.kernelUs : 0);
        b.nSpan++;
        b.chSeen = s.channels;
        return true;
      }
      if (issued <= blockStart) return false;
      if (i > 0 && bins_[i - 1].n == 0 && issued <= blockStart + 2 * block) return false;
    }
    Bin& b = bins_[i];
    b.recent[b.n % kRecent] = static_cast<float>(s.us);
    b.recentKernel[b.n % kRecent] = static_cast<float>(s.kernelUs > 0 ? s.kernelUs : 0);
    if (s.kernelUs <= 0) b.kernelMissing++;
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

bool BucketExplorer::roundDone(uint64_t issued) const {
  if (phase_ != Phase::Exploring || !planFinal_ || issued < planEnd()) return false;
  bool all = true;
  for (int i = 0; i < nBins_; ++i) {
    if (quiet_) {  // one span per local rank
      if (bins_[i].nSpan < static_cast<uint32_t>(spc_)) all = false;
      continue;
    }
    int calls = std::max(0, static_cast<int>(bins_[i].planned) - static_cast<int>(bins_[i].unmeasured));
    if (bins_[i].n < static_cast<uint32_t>(calls) * static_cast<uint32_t>(spc_)) all = false;
  }
  if (all) return true;
  // Samples still missing. After the grace calls, enoughAfterGrace() decides; a round short of that keeps waiting
  // (late samples end it through addSample) until the give-up cap.
  uint64_t grace = static_cast<uint64_t>(std::max(0, p_.graceCalls));
  if (issued >= planEnd() + grace && enoughAfterGrace()) return true;
  return issued >= planEnd() + std::max(grace, static_cast<uint64_t>(std::max(0, p_.giveUpCalls)));
}

CommitInfo BucketExplorer::finishRound(uint64_t effectiveFrom, bool mayCommit) {
  effectiveFrom = std::max(effectiveFrom, planEnd());
  CommitInfo info;
  info.stage = stage_;
  info.before = base_;
  info.calls = planLen_;
  std::array<double, kMaxArms> period{};  // each arm's period estimate, 0 = unmeasured
  double fastest = 0;
  periodEstimates(period, fastest);
  info.detail = roundDetail(period);
  info.hostBound = hostBound();
  if (stage_ == kScreen) keepSlowdowns(period, fastest);
  int win = leader(info.hostBound);
  // Safety: leaving the base needs evidence on both sides; a round that ran out of calls without it keeps
  // NCCL's choice (stage 1; a re-explore falls back to it too) or the stage-1 winner (stage 2).
  if (!confident(win)) {
    info.notEnough = true;
    win = -1;
    if (stage_ == kScreen) base_ = Decision{};
  }
  double winUs = win >= 0 ? period[win] : 0;
  Decision winner = win >= 0 ? bins_[win].d : base_;
  if (win >= 0) {
    learned_ = winner;
    learnedUs_ = winUs;
    learnedSamples_ = std::max(bins_[win].n, bins_[win].nSpan);
    if (stage_ != kChannels) baseChannels_ = bins_[win].chSeen;
  }
  Decision applied = (mayCommit && win >= 0) ? winner : base_;
  info.after = applied;
  info.afterUs = winUs;
  current_ = applied;
  currentFrom_ = effectiveFrom;
  currentUs_ = (mayCommit && win >= 0) ? winUs : 0;  // no drift watching without a measured reference
  phase_ = Phase::Settled;
  driftN_ = driftHits_ = 0;
  return info;
}

std::string BucketExplorer::roundDetail(const std::array<double, kMaxArms>& period) const {
  std::string detail;
  bool spans = spanRanked();
  char buf[112], name[48];
  for (int i = 0; i < nBins_; ++i) {
    const Bin& b = bins_[i];
    Decision shown = b.d;
    if (stage_ == kChannels && b.chRel == 0 && b.chSeen > 0) shown.channels = static_cast<int16_t>(b.chSeen);
    const char* sep = detail.empty() ? "" : " ";
    if (!measured(b)) {
      snprintf(buf, sizeof buf, "%s%s -", sep, describe(shown, name, sizeof name));
    } else {
      double k = kernelEstimate(b);
      // Span-ranked: "(2 spans)"; otherwise the number of per-call samples.
      char count[24];
      if (spans)
        snprintf(count, sizeof count, "(%u span%s)", b.nSpan, b.nSpan == 1 ? "" : "s");
      else
        snprintf(count, sizeof count, "(%u)", b.n);
      if (k > 0)
        snprintf(buf, sizeof buf, "%s%s %.2fus/k%.2f%s", sep, describe(shown, name, sizeof name), period[i], k, count);
      else
        snprintf(buf, sizeof buf, "%s%s %.2fus%s", sep, describe(shown, name, sizeof name), period[i], count);
    }
    detail += buf;
  }
  return detail;
}

void BucketExplorer::keepSlowdowns(const std::array<double, kMaxArms>& period, double fastest) {
  slowdown_.fill(0);
  fastestUs_ = fastest;
  for (int i = 0; i < nBins_; ++i)
    if (int slot = slotOf(bins_[i].d); period[i] > 0 && slot < coll::kNumAlgos * coll::kNumProtos)
      slowdown_[slot] = static_cast<float>(period[i] / fastest);
}

int BucketExplorer::slotOf(const Decision& d) {
  // Arms come from the cost table (in range); anything else shares the last slot, which no arm uses.
  bool ok = d.algo >= 0 && d.algo < coll::kNumAlgos && d.proto >= 0 && d.proto < coll::kNumProtos;
  return ok ? d.algo * coll::kNumProtos + d.proto : coll::kNumAlgos * coll::kNumProtos;
}

float BucketExplorer::slowdown(int algo, int proto) const {
  return slowdown_[slotOf(Decision{static_cast<int8_t>(algo), static_cast<int8_t>(proto), 0})];
}

bool BucketExplorer::beginDuel(uint64_t start) {
  if (phase_ != Phase::Settled || stage_ != kScreen || !adaptive_ || p_.duelCalls <= 0 || current_.algo < 0)
    return false;
  int win = -1;
  for (int i = 0; i < nBins_; ++i)
    if (bins_[i].d == current_) win = i;
  if (win < 0 || bins_[win].n == 0) return false;
  bool quiet = p_.quietDuelCalls >= 3;
  DuelArms arms = duelArms(win, quiet);
  if (arms.n == 1) return false;  // the winner alone: nothing came close
  std::array<Bin, kMaxDuelArms> fresh{};
  int nccl = -1;
  for (int k = 0; k < arms.n; ++k) {
    fresh[k] = Bin{bins_[arms.bin[k]].d};
    if (arms.bin[k] == ncclPick_) nccl = k;  // NCCL's choice keeps its margin in the duel
  }
  for (int k = 0; k < arms.n; ++k) bins_[k] = fresh[k];
  nBins_ = arms.n;
  ncclPick_ = nccl;
  base_ = current_;
  stage_ = kDuel;
  quiet_ = quiet;  // at least one untimed call between a block's timed ends
  nBlocks_ = arms.n;
  for (int k = 0; k < arms.n; ++k) {
    blockArm_[k] = static_cast<int8_t>(k);
    blockSpoiled_[k] = false;
  }
  startRound(start);
  return true;
}

BucketExplorer::DuelArms BucketExplorer::duelArms(int win, bool quiet) const {
  // Challengers: the best other arm by period when it came close, and NCCL's own choice (the reference a new
  // choice must beat by ncclMargin) whenever the screen left it, however clearly: screening calls come in pairs
  // right after another arm's, and some arms' first calls after a switch cost far less than their calls back to
  // back, so a lucky screen would otherwise skip a duel reserved for close calls (measurements: docs/readme/tuner.md).
  std::array<double, kMaxArms> period{};  // stage 1's estimates, read once
  double bestUs = 0;
  periodEstimates(period, bestUs);
  // The two fastest other arms (the first of equals first).
  std::array<int, 2> others{-1, -1};
  for (int i = 0; i < nBins_; ++i) {
    if (i == win || bins_[i].n == 0) continue;
    if (others[0] < 0 || period[i] < period[others[0]]) {
      others[1] = others[0];
      others[0] = i;
    } else if (others[1] < 0 || period[i] < period[others[1]]) {
      others[1] = i;
    }
  }
  DuelArms arms;
  auto inDuel = [&](int bin) {
    return bin == win || std::find(arms.bin.begin(), arms.bin.begin() + arms.n, bin) != arms.bin.begin() + arms.n;
  };
  bool ncclMeasured = ncclPick_ >= 0 && bins_[ncclPick_].n > 0;
  // The best other arm when it came close; quiet duels also the runner-up, both within quietDuelRatio: the profiler
  // slows some arms' screening calls far above their untimed cost, which only a quiet duel's spans show.
  const double ratio = quiet ? p_.quietDuelRatio : p_.duelRatio;
  for (int k = 0; k < (quiet ? 2 : 1); ++k)
    if (others[k] >= 0 && period[others[k]] <= ratio * period[win]) arms.bin[arms.n++] = others[k];
  // Host-bound rounds too: they leave NCCL's choice when its period was over hostTieRatio the best, and the host's
  // pace wanders enough for a screen to show that by luck.
  if (ncclMeasured && !inDuel(ncclPick_)) arms.bin[arms.n++] = ncclPick_;
  // One node: the duel ends with the same-algorithm kernel rule (leader()), which can only pick among the duel's
  // arms, so an arm of NCCL's algorithm with a clearly shorter stage-1 kernel comes along. Without it a duel that
  // kept NCCL's choice kept it over that arm, even where stage 1 had measured the arm faster per call.
  if (arms.n > 0 && ncclMeasured) {
    int shorter = sameAlgoShorterKernel(ncclPick_, period.data(), bestUs);
    if (!inDuel(shorter)) arms.bin[arms.n++] = shorter;
  }
  arms.bin[arms.n++] = win;  // the winner's block last: it goes on running after the plan
  return arms;
}

bool BucketExplorer::beginNext(uint64_t start) {
  if (beginDuel(start)) return true;
  return p_.channelStage && beginStage2(start);
}

bool BucketExplorer::beginStage2(uint64_t start) {
  if (phase_ != Phase::Settled || (stage_ != kScreen && stage_ != kDuel) || current_.algo < 0 || baseChannels_ <= 0)
    return false;
  // After a quiet duel the search ends: stage 2 times every call, and the profiler's toll grows with the channel
  // count (a proxy op per channel), so fewer channels would look faster than they are.
  if (quiet_) return false;
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
  stage_ = kChannels;
  quiet_ = false;
  startRound(start);
  return true;
}

bool BucketExplorer::driftDetected() {
  if (phase_ != Phase::Settled || currentUs_ <= 0) return false;
  int w = std::clamp(p_.driftWindow, 2, kRecent);
  if (driftN_ < w) return false;
  // Same estimator as the reference, so launch skew in half the samples is not mistaken for drift.
  double est = estimate(driftBuf_.data(), w, 0, p_.meanPeriods);
  driftN_ = 0;
  if (est > currentUs_ * p_.driftRatio && est - currentUs_ > p_.driftMinUs) {
    driftHits_++;
  } else {
    driftHits_ = 0;
  }
  if (driftHits_ >= std::max(1, p_.driftWindows) && reexplores_ < p_.maxReexplores) {
    driftHits_ = 0;
    return true;
  }
  return false;
}

}  // namespace icn::tuner
