#include "tuner/agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/log.h"

namespace icn::tuner {

Agreement::Agreement(uint64_t commId, int nRanks, Role role, const AgreeParams& p,
                     std::vector<AgreedDecision> initial)
    : commId_(commId), nRanks_(nRanks), role_(role), p_(p), initial_(std::move(initial)) {}

void Agreement::setWake(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

void Agreement::setWaitHint(std::string hint) {
  std::lock_guard<std::mutex> lock(mu_);
  hint_ = std::move(hint);
}

void Agreement::wake() {
  std::function<void()> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    w = wake_;
  }
  if (w) w();
}

bool Agreement::waitFor(const std::function<bool()>& ready, int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, ms));
  return cv_.wait_until(lock, deadline, [&] { return ready() || frozenFrom_.load() != kNever; });
}

Agreement::Gate Agreement::gate(uint64_t k, int localRanks) {
  if (localRanks_.load(std::memory_order_relaxed) < 0) {
    int expected = -1;
    if (localRanks_.compare_exchange_strong(expected, localRanks)) wake();  // followers report it; START needs it
  }
  uint64_t s = start_.load();
  if (s == kNever) {
    if (role_ == Role::Leader) {
      std::lock_guard<std::mutex> lock(mu_);
      next_ = std::max(next_, k + 1);  // START's call is picked past this, under the same lock
    }
    if (frozen() || (k < p_.window && start_.load() == kNever)) return Gate::Untuned;
    if (!waitFor([&] { return start_.load() != kNever; }, std::max(p_.waitMs, p_.startWaitMs))) {
      std::lock_guard<std::mutex> lock(mu_);
      dropAt_ = kNever;
      dropPending_ = role_ == Role::Follower;
    }
    if (start_.load() == kNever) {
      freeze(0, role_ == Role::Leader ? "not every rank's process joined in time" : "no word from the leader");
      return Gate::Untuned;
    }
    s = start_.load();
  }
  if (k < s) return Gate::Untuned;
  if (role_ == Role::Leader && k + p_.window / 2 >= horizon_.load(std::memory_order_relaxed) && !frozen()) {
    bool ask = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (k + p_.window > wantHorizon_) {
        wantHorizon_ = k + p_.window;
        ask = true;
      }
    }
    if (ask) wake();
  }
  if (k <= horizon_.load() || frozen()) return Gate::Tuned;
  if (!waitFor([&] { return k <= horizon_.load(); }, p_.waitMs)) {
    uint64_t h = horizon_.load();
    if (role_ == Role::Follower) {
      std::lock_guard<std::mutex> lock(mu_);
      dropAt_ = h;
      dropPending_ = true;
    }
    freeze(h + 1, role_ == Role::Leader ? "the agreement service fell behind" : "no horizon from the leader in time");
  }
  return Gate::Tuned;
}

Decision Agreement::decisionAt(int c, int b, uint64_t k) const {
  if (c < 0 || c >= coll::kNumColls || b < 0 || b >= coll::kNumBuckets) return Decision{};
  const Slot& slot = table_[c][b];
  int n = slot.n.load(std::memory_order_acquire);
  if (n == 0) return Decision{};
  uint64_t frozenAt = frozenFrom_.load();
  for (int i = n - 1; i >= 0; --i) {
    uint64_t w = slot.w[i].load(std::memory_order_relaxed);
    uint64_t from = w >> 16;
    if (from <= k && from < frozenAt) return unpackDecision(w);
  }
  return Decision{};
}

void Agreement::propose(int c, int b, const Decision& d) {
  if (role_ != Role::Leader || c < 0 || c >= coll::kNumColls || b < 0 || b >= coll::kNumBuckets) return;
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(AgreedDecision{c, b, d});
}

void Agreement::publish(const std::vector<AgreedDecision>& ds, uint64_t from) {
  for (const AgreedDecision& a : ds) {
    Slot& slot = table_[a.coll][a.bucket];
    int n = slot.n.load(std::memory_order_relaxed);
    if (n == kMaxPerBucket) {
      ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: more than %d agreed decisions; later ones ignored",
               static_cast<unsigned long long>(commId_), coll::collName(a.coll), a.bucket, kMaxPerBucket);
      continue;
    }
    slot.w[n].store(packDecision(a.d, from), std::memory_order_relaxed);
    slot.n.store(n + 1, std::memory_order_release);
  }
}

void Agreement::onMembers(int followerRanks, int followerProcesses) {
  std::lock_guard<std::mutex> lock(mu_);
  followerRanks_ = followerRanks;
  followerProcs_ = followerProcesses;
}

void Agreement::report(int c, int b, std::span<const ArmEstimate> arms, const Decision& ncclPick) {
  if (c < 0 || c >= coll::kNumColls || b < 0 || b >= coll::kNumBuckets) return;
  bool send = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reported_[c][b] || frozen()) return;
    reported_[c][b] = true;
    if (role_ == Role::Leader) {
      combined_[c][b].nccl = ncclPick;
      combine(c, b, arms, true);
    } else {
      outbox_.push_back(Report{c, b, std::vector<ArmEstimate>(arms.begin(), arms.end())});
      send = true;
    }
  }
  if (send) wake();
}

bool Agreement::onReport(int c, int b, std::span<const ArmEstimate> arms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (role_ != Role::Leader || start_.load() == kNever) return false;
  if (c < 0 || c >= coll::kNumColls || b < 0 || b >= coll::kNumBuckets || arms.size() > BucketExplorer::kMaxArms)
    return false;
  if (frozen()) return true;
  combine(c, b, arms, false);
  return true;
}

bool Agreement::takeReport(int* c, int* b, std::vector<ArmEstimate>* arms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (outbox_.empty()) return false;
  *c = outbox_.front().coll;
  *b = outbox_.front().bucket;
  *arms = std::move(outbox_.front().arms);
  outbox_.erase(outbox_.begin());
  return true;
}

std::vector<AgreedWinner> Agreement::winners() const {
  std::lock_guard<std::mutex> lock(mu_);
  return winners_;
}

void Agreement::combine(int c, int b, std::span<const ArmEstimate> arms, bool local) {
  Combined& m = combined_[c][b];
  if (m.done || m.reports >= processes_) return;
  auto slot = [](const Decision& d) {
    return d.algo >= 0 && d.algo < coll::kNumAlgos && d.proto >= 0 && d.proto < coll::kNumProtos && d.channels == 0
               ? d.algo * coll::kNumProtos + d.proto
               : -1;
  };
  for (const ArmEstimate& a : arms) {
    int s = slot(a.d);
    if (s < 0 || !(a.us > 0) || !std::isfinite(a.us) || a.usable < p_.minSamples) continue;
    m.worst[s] = std::max(m.worst[s], a.us);
    ++m.seen[s];
  }
  ++m.reports;
  m.leaderIn = m.leaderIn || local;
  if (m.reports < processes_ || !m.leaderIn) return;
  m.done = true;
  // Every process measured it, or it is not compared: an arm one process never timed may be its slowest.
  int ref = slot(m.nccl), best = ref;
  std::string detail;
  for (int s = 0; s < kSlots; ++s) {
    if (m.seen[s] < processes_) continue;
    char name[48], buf[80];
    Decision d{static_cast<int8_t>(s / coll::kNumProtos), static_cast<int8_t>(s % coll::kNumProtos), 0};
    snprintf(buf, sizeof buf, "%s%s %.2fus", detail.empty() ? "" : " ", describe(d, name, sizeof name), m.worst[s]);
    detail += buf;
    if (ref >= 0 && m.seen[ref] >= processes_ && m.worst[s] < m.worst[best]) best = s;
  }
  if (ref < 0 || m.seen[ref] < processes_) {
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: keeps NCCL's choice: not every process measured it "
             "(slowest process per arm: %s)", static_cast<unsigned long long>(commId_), coll::collName(c), b,
             detail.empty() ? "-" : detail.c_str());
    return;
  }
  Decision win{static_cast<int8_t>(best / coll::kNumProtos), static_cast<int8_t>(best % coll::kNumProtos), 0};
  if (best != ref && !(m.worst[best] < m.worst[ref] * (1.0 - p_.margin))) {
    best = ref;
    win = m.nccl;
  }
  winners_.push_back(AgreedWinner{c, b, win, m.worst[best], processes_});
  char name[48];
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: %d processes measured; slowest process per arm: %s; %s %s",
           static_cast<unsigned long long>(commId_), coll::collName(c), b, processes_, detail.c_str(),
           best == ref ? "keeps NCCL's choice" : "announces", describe(win, name, sizeof name));
  if (best != ref) pending_.push_back(AgreedDecision{c, b, win});
}

bool Agreement::takeStart(uint64_t* s, uint64_t* h, std::vector<AgreedDecision>* decisions) {
  std::lock_guard<std::mutex> lock(mu_);
  int local = localRanks_.load();
  if (role_ != Role::Leader || startSent_ || frozen() || local < 0 || local + followerRanks_ != nRanks_) return false;
  // Past every rank: followers never pass call `window` without START, and the leader's calls so far are below
  // next_ (its own gate waits at `window` for start_, which is only set once every follower has START queued).
  *s = std::max(p_.window, next_ + 1);
  processes_ = followerProcs_ + 1;
  *h = *s + p_.window;
  *decisions = initial_;
  startSent_ = true;
  return true;
}

void Agreement::sentStart(uint64_t s, uint64_t h, const std::vector<AgreedDecision>& decisions) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frozen()) return;
    publish(decisions, s);
    horizon_.store(h);
    wantHorizon_ = h;
    start_.store(s);
  }
  cv_.notify_all();
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: every rank's process joined; tuning from call %llu (%zu cached "
           "decisions agreed)", static_cast<unsigned long long>(commId_), static_cast<unsigned long long>(s),
           decisions.size());
}

bool Agreement::takeHorizon(uint64_t* h, std::vector<AgreedDecision>* decisions) {
  std::lock_guard<std::mutex> lock(mu_);
  if (start_.load() == kNever || frozen() || wantHorizon_ <= horizon_.load()) return false;
  *h = wantHorizon_;
  *decisions = std::move(pending_);
  pending_.clear();
  return true;
}

void Agreement::sentHorizon(uint64_t h, const std::vector<AgreedDecision>& decisions) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frozen()) return;
    publish(decisions, h + 1);
    horizon_.store(h);
  }
  cv_.notify_all();
  logDecisions(decisions, h + 1, "every process takes");
}

bool Agreement::onStart(uint64_t s, uint64_t h, const std::vector<AgreedDecision>& decisions) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frozen()) return true;  // gave up already; the leader hears of it
    if (start_.load() != kNever || h < s || s < p_.window) return false;
    publish(decisions, s);
    horizon_.store(h);
    start_.store(s);
  }
  cv_.notify_all();
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: the leader's process starts tuning at call %llu (%zu cached decisions)",
           static_cast<unsigned long long>(commId_), static_cast<unsigned long long>(s), decisions.size());
  return true;
}

bool Agreement::onHorizon(uint64_t h, const std::vector<AgreedDecision>& decisions) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frozen()) return true;
    if (start_.load() == kNever || h < horizon_.load()) return false;
    publish(decisions, h + 1);
    horizon_.store(h);
  }
  cv_.notify_all();
  logDecisions(decisions, h + 1, "the leader's process announced");
  return true;
}

void Agreement::logDecisions(const std::vector<AgreedDecision>& decisions, uint64_t from, const char* what) const {
  for (const AgreedDecision& a : decisions) {
    char d[48];
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx %s 2^%d B: %s %s from call %llu",
             static_cast<unsigned long long>(commId_), coll::collName(a.coll), a.bucket, what,
             describe(a.d, d, sizeof d), static_cast<unsigned long long>(from));
  }
}

uint64_t Agreement::freeze(uint64_t from, const char* why, bool quiet) {
  uint64_t now;
  bool first = false;
  std::string hint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hint = hint_;
    uint64_t cur = frozenFrom_.load();
    now = std::min(cur, from);
    first = cur == kNever;
    if (first) quietFreeze_.store(quiet);
    frozenFrom_.store(now);
  }
  cv_.notify_all();
  if (first && quiet) {
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement ends at call %llu (%s)",
             static_cast<unsigned long long>(commId_), static_cast<unsigned long long>(now), why);
  } else if (first) {
    if (start_.load() == kNever)
      ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: no agreement across processes (%s): NCCL's choice for every "
               "call%s%s", static_cast<unsigned long long>(commId_), why, hint.empty() ? "" : "; ", hint.c_str());
    else
      ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: agreement across processes stops at call %llu (%s): decisions "
               "in force stay, running plans finish, nothing new is decided",
               static_cast<unsigned long long>(commId_), static_cast<unsigned long long>(now), why);
  }
  wake();
  return now;
}

bool Agreement::takeDrop(uint64_t* horizon) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dropPending_) return false;
  dropPending_ = false;
  *horizon = dropAt_;
  return true;
}

}  // namespace icn::tuner
