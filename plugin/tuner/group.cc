#include "tuner/group.h"

#include <algorithm>
#include <cstdio>

#include "core/log.h"
#include "tuner/agree/service.h"
#include "tuner/explore/bucket_log.h"
#include "tuner/group_registry.h"

namespace icn::tuner {

Group::Group(uint64_t commId, int nRanks, int nNodes, GroupConfig cfg, const std::vector<CacheEntry>& cache)
    : commId_(commId), nRanks_(nRanks), nNodes_(nNodes), cfg_(std::move(cfg)) {
  // Combining processes' measurements follows one process's rules.
  cfg_.agree.minSamples = cfg_.explore.minSamples;
  cfg_.agree.margin = cfg_.explore.ncclMargin;
  for (const CacheEntry& e : cache)
    if (e.nRanks == nRanks && e.nNodes == nNodes && e.coll >= 0 && e.coll < coll::kNumColls) cache_.push_back(e);
}

void Group::applyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cacheChecked_.load()) return;
  allLocal_.store(complete());
  if (!complete() && !cfg_.cacheEverywhere) {
    if (!cache_.empty())
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: %zu cached decisions not used here: ranks live in other "
               "processes, which may hold other tables", static_cast<unsigned long long>(commId_), cache_.size());
  } else {
    for (const CacheEntry& e : cache_) {
      Bucket& b = buckets_[e.coll][e.bucket];
      b.settleCached(e.decision, e.meanUs);
    }
    if (!cache_.empty())
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: %zu cached decisions for nRanks=%d nNodes=%d from %s",
               static_cast<unsigned long long>(commId_), cache_.size(), nRanks_, nNodes_, cfg_.cachePath.c_str());
  }
  cacheChecked_.store(true);
}

Group::~Group() {
  if (agree_) agree::detach(agree_.get());
  for (auto& row : buckets_)
    for (Bucket& b : row)
      if (b.holdsDemand()) demandChanged(-1);
  releaseQuiet(this);
  if (cfg_.mode == Mode::Off || cfg_.cachePath.empty()) return;
  if (!persists()) return;
  std::vector<CacheEntry> entries = learnedEntries();
  if (entries.empty()) return;
  std::string why;
  if (saveCache(cfg_.cachePath, entries, &why, cfg_.cacheKey) == Status::Ok)
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: saved %zu learned decisions to %s",
             static_cast<unsigned long long>(commId_), entries.size(), cfg_.cachePath.c_str());
  else
    ICN_WARN(subsys::Tuning, "tuner: cannot save the learned table: %s", why.c_str());
}

int Group::join() {
  for (int i = 0; i < kMaxLocal; ++i) {
    bool expected = false;
    if (active_[i].compare_exchange_strong(expected, true)) {
      members_.fetch_add(1);
      return i;
    }
  }
  return -1;
}

void Group::leave(int slot) {
  if (slot < 0 || slot >= kMaxLocal) return;
  if (active_[slot].exchange(false)) members_.fetch_sub(1);
}

void Group::noteRank(int rank) {
  if (rank < 0 || rank >= nRanks_) return;
  {
    std::lock_guard<std::mutex> lock(ranksMu_);
    if (std::find(ranks_.begin(), ranks_.end(), rank) != ranks_.end() || ranks_.size() >= kMaxNotedRanks) return;
    ranks_.push_back(rank);
  }
  if (agree_) agree_->noteRank(rank);  // the leader counts it as held here; a follower reports it
  if (rank != 0 || hasRank0_.exchange(true)) return;
  // Rank 0 turned out to live here after another local rank registered us as a follower (before any call).
  if (agree_ && agree_->role() == Agreement::Role::Follower && agreeState_.load() == 0) startAgreement();
}

void Group::startAgreement() {
  if (nRanks_ < 2) return;
  if (agree_) agree::detach(agree_.get());
  bool lead = hasRank0_.load();
  std::vector<AgreedDecision> initial;
  if (lead)
    for (const CacheEntry& e : cache_) initial.push_back(AgreedDecision{e.coll, e.bucket, e.decision});
  agree_ = std::make_shared<Agreement>(commId_, nRanks_, lead ? Agreement::Role::Leader : Agreement::Role::Follower,
                                       cfg_.agree, std::move(initial));
  {
    std::lock_guard<std::mutex> lock(ranksMu_);
    for (int r : ranks_) agree_->noteRank(r);
  }
  std::string why;
  // With the tuner off only the diagnosis's gathering is lost: said at INFO (each process still reports alone).
  if (!agree::attach(agree_, nNodes_, &why)) agree_->freeze(0, why.c_str(), /*quiet=*/cfg_.mode == Mode::Off);
}

void Group::announceRanksForDiagnosis() {
  if (cfg_.mode != Mode::Off) return;
  std::shared_ptr<Agreement> a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    a = agree_;
  }
  if (a) a->countLocalRanks(std::max(1, members_.load()));
}

Agreement* Group::agreement() {
  int st = agreeState_.load(std::memory_order_acquire);
  if (st == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    st = agreeState_.load();
    if (st == 0) {
      st = agree_ && !complete() ? 1 : 2;
      if (st == 2 && agree_) {
        agree::detach(agree_.get());
        agree_.reset();
      }
      agreeState_.store(st, std::memory_order_release);
    }
  }
  return st == 1 ? agree_.get() : nullptr;
}

bool Group::persists() const {
  if (allLocal_.load() || cfg_.cacheEverywhere) return true;
  return agree_ && agree_->role() == Agreement::Role::Leader;
}

void Group::reportRound(int c, int bkt) {
  Bucket& b = buckets_[c][bkt];
  if (!agree_ || agreeState_.load() != 1) return;
  std::array<ArmEstimate, BucketExplorer::kMaxArms> arms{};
  int n = b.armEstimates(arms);
  agree_->report(c, bkt, std::span<const ArmEstimate>(arms.data(), static_cast<size_t>(n)), b.ncclChoice());
}

bool Group::complete() const { return members_.load() >= nRanks_; }

uint64_t Group::maxNext(int c, int b) const {
  uint64_t m = 0;
  for (int i = 0; i < kMaxLocal; ++i)
    if (active_[i].load()) m = std::max(m, next_[i][c][b].load());
  return m;
}

uint64_t Group::minNext(int c, int b) const {
  uint64_t m = UINT64_MAX;
  for (int i = 0; i < kMaxLocal; ++i)
    if (active_[i].load()) m = std::min(m, next_[i][c][b].load());
  return m == UINT64_MAX ? 0 : m;
}

uint64_t Group::planBound(int c, int b) const {
  // Every index a local rank can ask for before the next time the lock is taken.
  return maxNext(c, b) + static_cast<uint64_t>(std::max(1, members_.load())) + 1;
}

uint64_t Group::minDecided(int c, int b) const {
  uint64_t m = UINT64_MAX;
  for (int i = 0; i < kMaxLocal; ++i)
    if (active_[i].load()) m = std::min(m, decided_[i][c][b].load());
  return m == UINT64_MAX ? 0 : m;
}

void Group::setQuiet(const Bucket& b, bool on) {
  auto i = &b - &buckets_[0][0];
  requestQuiet(this, static_cast<int>(i / coll::kNumBuckets), static_cast<int>(i % coll::kNumBuckets), on);
}

void Group::startExploring(Bucket& b) {
  if (!b.takeDemand(tunerTick())) return;
  held_.fetch_add(1);
  demandChanged(1);
}

void Group::stopExploring(Bucket& b) {
  setQuiet(b, false);
  if (!b.releaseDemand()) return;
  held_.fetch_sub(1);
  demandChanged(-1);
}

void Group::parkIdle(uint64_t tick, uint64_t idleCalls) {
  if (held_.load() == 0) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (int c = 0; c < coll::kNumColls; ++c)
    for (int bkt = 0; bkt < coll::kNumBuckets; ++bkt) {
      Bucket& b = buckets_[c][bkt];
      if (!b.idle(tick, idleCalls)) continue;
      stopExploring(b);
      ICN_TRACE(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: idle while exploring; profiler released",
                static_cast<unsigned long long>(commId_), coll::collName(c), bkt);
    }
}

Decision Group::decide(int slot, int c, int bkt, const CostTable& table) {
  if (slot < 0 || slot >= kMaxLocal || c < 0 || c >= coll::kNumColls || bkt < 0 || bkt >= coll::kNumBuckets)
    return Decision{};
  if (!cacheChecked_.load()) applyCache();
  uint64_t index = next_[slot][c][bkt].fetch_add(1);
  // Counted only while some bucket of this group measures (a settled job's calls pay no further shared write); a
  // bucket parked meanwhile knows other calls came when it resumes.
  uint64_t seq = 0;
  if (held_.load(std::memory_order_relaxed) > 0) seq = decides_.fetch_add(1, std::memory_order_relaxed) + 1;
  noteCallForQuiet(this, c, bkt);  // another bucket's call: a quiet request for "the next call" is stale
  uint64_t w = buckets_[c][bkt].word();
  bool quiet = false;
  Decision d = ((w & 1) && index >= (w >> 16)) ? unpackDecision(w) : slowPath(slot, c, bkt, index, seq, table, quiet);
  decided_[slot][c][bkt].store(index + 1);
  // The parking clock only runs while something measures (only then can a bucket hold the profiler), so a
  // settled job's calls never write the process-wide counter.
  if (measurementDemand().load(std::memory_order_relaxed) > 0) {
    uint64_t tick = advanceTunerTick();
    if ((tick & 31) == 0) {
      parkIdle(tick);  // this group, registered or not (tests, private v2-v4 groups) ...
      parkIdleOtherGroups(this, tick, kParkAfterCalls);  // ... and the others, whose buckets may never be called again
    }
    // A quiet duel's untimed calls need every other demand gone: buckets not called for a few decisions (they
    // explored in nccl-tests' warm-up and wait for their size to come back) give the profiler back now, and take
    // it again on their next call.
    if (quiet) {
      parkIdle(tick, kQuietParkCalls);
      parkIdleOtherGroups(this, tick, kQuietParkCalls);
    }
  }
  return d;
}

Decision Group::slowPath(int slot, int c, int bkt, uint64_t index, uint64_t seq, const CostTable& table,
                         bool& quiet) {
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = buckets_[c][bkt];
  if (b.phase() == BucketExplorer::Phase::Unseen) firstCall(c, bkt, table);
  b.extendPlan(planBound(c, bkt));
  if (b.phase() == BucketExplorer::Phase::Exploring) {
    if (b.noteExploringCall(index, seq, planBound(c, bkt), measurementDemand().load() != 0))
      logQuietBlockCut(commId_, c, bkt, index);
    startExploring(b);
  }
  maybeTransition(c, bkt);
  b.extendPlan(planBound(c, bkt));
  Decision d = b.decisionFor(index);
  // NCCL reads the event mask as a call is enqueued, before it asks us about it: set it for the call the least
  // advanced local rank enqueues next (ranks driven one after the other enqueue call i after the first decided it;
  // ranks in one group enqueue both before either decides).
  quiet = b.wantsQuiet(minNext(c, bkt));
  setQuiet(b, quiet);
  b.publish();
  return d;
}

void Group::firstCall(int c, int bkt, const CostTable& table) {
  Bucket& b = buckets_[c][bkt];
  // Adaptive: every rank lives here and shares this state. Otherwise ranks in other processes compute the very
  // same (fixed) plan from the cost table alone, which NCCL makes identical on every rank.
  bool adaptive = complete();
  SkipReport skips;
  if (cfg_.mode == Mode::Online) skips = collectCandidates(c, bkt, table, adaptive);
  if (!b.begin(cfg_.explore, adaptive, std::max(1, members_.load()))) return;
  startExploring(b);  // the plan's warm calls absorb the calls that cannot be measured yet
  logExploring(commId_, c, bkt, b, cfg_.explore, adaptive, skips);
}

SkipReport Group::collectCandidates(int c, int bkt, const CostTable& table, bool adaptive) {
  Bucket& b = buckets_[c][bkt];
  // NCCL's own cost ranking first (its choice leads), then a neighbouring bucket's measured winner moves to the
  // front: good arms are screened early, so their estimates are in when the confirm calls are handed out.
  b.takeCandidates(table);
  // Measurements differ between processes: only a group holding every rank may let them shape the plan.
  for (int nb : {bkt - 1, bkt + 1}) {
    if (!adaptive || nb < 0 || nb >= coll::kNumBuckets) continue;
    Bucket::Learned near = buckets_[c][nb].learned();
    if (near.samples > 0) b.moveToFront(near.d);
  }
  Decision pick = table.ncclChoice();
  SkipReport report;
  skipSlowLl(b, table, pick, report);
  if (adaptive) skipFarSlower(c, bkt, report);
  return report;
}

void Group::skipSlowLl(Bucket& b, const CostTable& table, const Decision& ncclPick, SkipReport& report) {
  // LL carries 8 bytes of data per 16-byte line, so where a call is long its bandwidth decides and LL cannot keep
  // up; NCCL's model knows but is kinder than the GPUs, and a screening call of such an arm costs milliseconds
  // before any smaller bucket can tell (skipFarSlower). Only LL: for the other protocols the model is wrong both
  // ways. The cost table is the same on every rank, so fixed plans skip alike. (docs/readme/tuner.md, "Why the
  // rules are what they are", has the measurements.)
  float ref = table.at(ncclPick.algo, ncclPick.proto);
  const double ratio = cfg_.modelSkipRatio;
  if (ratio <= 0 || ref < kModelSkipFromUs) return;
  size_t used = 0;
  report.slowLlRatio = ratio;
  report.slowLl = b.removeCandidates([&](const Decision& d) {
    float cost = table.at(d.algo, d.proto);
    if (d.proto != coll::kLL || cost <= ratio * ref) return false;
    char name[48];
    int n = snprintf(report.slowLlList.data() + used, report.slowLlList.size() - used, "%s%s %.1fx", used ? " " : "",
                     describe(d, name, sizeof name), cost / ref);
    if (n > 0) used = std::min(report.slowLlList.size() - 1, used + static_cast<size_t>(n));
    return true;
  });
}

void Group::skipFarSlower(int c, int bkt, SkipReport& report) {
  // Large buckets only skip arms measured far slower in the nearest smaller measured bucket: there a screening
  // call of a slow arm costs milliseconds and the ratio only grows with size. Small buckets keep every arm: their
  // calls are cheap and their periods noisy. NCCL's own choice always stays (the reference).
  Bucket& b = buckets_[c][bkt];
  const BucketExplorer* ref = nullptr;
  for (int nb = bkt - 1; nb >= 0 && !ref; --nb)
    if (buckets_[c][nb].explorer().fastestPeriodUs() > 0) {
      ref = &buckets_[c][nb].explorer();
      report.farFrom = nb;
    }
  if (!ref || ref->fastestPeriodUs() < kSkipFromUs) return;
  report.farSlowdown = kSkipSlowdown;
  report.farSlower =
      b.removeCandidates([&](const Decision& d) { return ref->slowdown(d.algo, d.proto) > kSkipSlowdown; });
}

void Group::maybeTransition(int c, int bkt) {
  Bucket& b = buckets_[c][bkt];
  bool online = cfg_.mode == Mode::Online;
  auto issued = [&] { return maxNext(c, bkt); };
  Bucket::RoundEnd end = b.finishRound(issued, online && complete());
  if (end.ended) {
    setQuiet(b, false);
    logCommit(c, bkt, end.info, end.committed);
    if (!end.committed && online) reportRound(c, bkt);
    if (end.demand == Bucket::Demand::Stop) stopExploring(b);
  }
  Bucket::Demand next =
      b.startPending(issued, minDecided(c, bkt), cfg_.explore, complete(), std::max(1, members_.load()));
  if (next == Bucket::Demand::Start) startExploring(b);
  if (next == Bucket::Demand::Stop) stopExploring(b);
  b.publish();
}

void Group::addSample(int c, int bkt, const Sample& s) {
  if (cfg_.mode == Mode::Off || c < 0 || c >= coll::kNumColls || bkt < 0 || bkt >= coll::kNumBuckets) return;
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = buckets_[c][bkt];
  if (!b.addSample(s, [&] { return maxNext(c, bkt); })) return;
  if (b.noteDrift(cfg_.mode == Mode::Online && complete())) logDrift(commId_, c, bkt, b.explorer());
  maybeTransition(c, bkt);
}

void Group::logCommit(int c, int bkt, const CommitInfo& ci, bool committed) {
  const char* why = cfg_.mode != Mode::Online ? "static mode"
                    : agree_ && agree_->role() == Agreement::Role::Leader
                        ? "ranks live in other processes: this process decides from every process's measurements"
                        : "ranks live in other processes: sent to the leader's process, which decides from every "
                          "process's";
  logRoundEnd(commId_, c, bkt, buckets_[c][bkt].explorer(), ci, committed, cfg_.explore.minSamples, why);
}

std::vector<CacheEntry> Group::learnedEntries() const {
  std::vector<CacheEntry> out;
  // Across processes the table holds what every process's measurements decided, not this process's own.
  if (agree_ && agree_->role() == Agreement::Role::Leader && agreeState_.load() == 1) {
    for (const AgreedWinner& w : agree_->winners())
      out.push_back(CacheEntry{w.coll, nRanks_, nNodes_, w.bucket, w.d, w.us, static_cast<uint64_t>(w.processes)});
    return out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (int c = 0; c < coll::kNumColls; ++c)
    for (int b = 0; b < coll::kNumBuckets; ++b) {
      Bucket::Learned l = buckets_[c][b].learned();
      if (l.samples > 0) out.push_back(CacheEntry{c, nRanks_, nNodes_, b, l.d, l.us, l.samples});
    }
  return out;
}

Decision Group::currentDecision(int c, int b) const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_[c][b].decisionFor(maxNext(c, b));
}

BucketExplorer::Phase Group::phase(int c, int b) const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_[c][b].phase();
}

}  // namespace icn::tuner
