#include "tuner/agree/agreement.h"

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

void Agreement::countLocalRanks(int localRanks) {
  int expected = -1;
  if (!localRanks_.compare_exchange_strong(expected, localRanks)) return;
  if (role_ == Role::Leader) {
    std::lock_guard<std::mutex> lock(mu_);
    ownCounted_ = true;  // every local rank was noted before its first call: START may count them
  }
  wake();  // followers report their ranks now
}

Agreement::Gate Agreement::gate(uint64_t k, int localRanks) {
  if (localRanks_.load(std::memory_order_relaxed) < 0) countLocalRanks(localRanks);
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
    if (start_.load() == kNever)
      stop(role_ == Role::Leader ? "not every rank's process joined in time" : "no word from the leader");
    if (start_.load() == kNever) return Gate::Untuned;  // a START in flight counts as delivered once stopped
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
    if (role_ == Role::Follower) {
      std::lock_guard<std::mutex> lock(mu_);
      dropAt_ = horizon_.load();
      dropPending_ = true;
    }
    stop(role_ == Role::Leader ? "the agreement service fell behind" : "no horizon from the leader in time");
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
  if (proposed_ >= kMaxQueuedDecisions) return;  // bounds what a late joiner's history can hold
  ++proposed_;
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

void Agreement::noteRank(int r) {
  if (r < 0 || r >= nRanks_) return;
  std::string lie;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto at = std::lower_bound(ranks_.begin(), ranks_.end(), r);
    if ((at != ranks_.end() && *at == r) || ranks_.size() >= static_cast<size_t>(kMaxLocalRanks)) return;
    ranks_.insert(at, r);
    if (role_ == Role::Leader) lie = claimOwn(r);
  }
  if (lie.empty()) return;
  ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: %s", static_cast<unsigned long long>(commId_), lie.c_str());
  stop(lie.c_str());
}

std::vector<int> Agreement::ranks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranks_;
}

std::string Agreement::claimOwn(int r) {
  auto [it, fresh] = owner_.emplace(r, 0);
  if (fresh || it->second == 0) return "";
  std::string lie = "follower " + members_[it->second - 1].name + " claimed rank " + std::to_string(r) +
                    ", which this process holds: it lied about its ranks";
  it->second = 0;
  return lie;
}

Agreement::Join Agreement::join(const std::string& name, int* id) {
  std::lock_guard<std::mutex> lock(mu_);
  bool late = announcedStart_ != kNever;
  size_t most = static_cast<size_t>(std::min(nRanks_ - 1, kMaxMembers));
  if (!late && members_.size() >= most) return Join::TooMany;
  if (members_.size() >= static_cast<size_t>(kMaxMembers)) return Join::TooMany;
  members_.push_back(Member{name, 0});
  *id = static_cast<int>(members_.size());
  return late ? Join::Late : Join::Member;
}

std::string Agreement::claimRanks(int id, std::span<const int> ranks) {
  std::string lie;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (role_ != Role::Leader || id < 1 || id > static_cast<int>(members_.size())) return "is no member";
    Member& m = members_[id - 1];
    if (m.ranks > 0) return "reports its ranks a second time";
    if (ranks.empty()) return "reports holding no rank";
    for (int r : ranks) {
      if (r < 0 || r >= nRanks_) {
        lie = "claims rank " + std::to_string(r) + " of a communicator of " + std::to_string(nRanks_) + " ranks";
        return lie;
      }
      auto it = owner_.find(r);
      if (it == owner_.end()) continue;
      lie = "claims rank " + std::to_string(r) + ", which " +
            (it->second == 0 ? std::string("this process (the leader) holds")
                             : "follower " + members_[it->second - 1].name + " claimed first: one of them lies");
      return lie;
    }
    for (int r : ranks) owner_.emplace(r, id);
    m.ranks = static_cast<int>(ranks.size());
  }
  wake();  // START may be due
  return "";
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

std::string Agreement::onReport(int id, int c, int b, std::span<const ArmEstimate> arms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (role_ != Role::Leader || id < 1 || id > static_cast<int>(members_.size())) return "is no member";
  if (c < 0 || c >= coll::kNumColls || b < 0 || b >= coll::kNumBuckets || arms.size() > BucketExplorer::kMaxArms)
    return "reports out of range";
  const Member& m = members_[id - 1];
  if (m.ranks == 0) return "reports measurements while holding no rank";
  if (announcedStart_ == kNever) return "reports measurements before START (no plan runs before it)";
  // Every sample is one tuned call of one local rank, and no rank runs a tuned call outside [START, horizon].
  uint64_t samples = 0;
  for (const ArmEstimate& a : arms) samples += a.usable;
  uint64_t h = flying_ ? flight_.h : horizon_.load();
  uint64_t calls = h >= announcedStart_ ? h - announcedStart_ + 1 : 0;
  if (samples > calls * static_cast<uint64_t>(m.ranks)) {
    char buf[200];
    snprintf(buf, sizeof buf, "reports %llu samples of %s 2^%d B, more than its %d ranks can have taken in the "
             "%llu calls announced since START", static_cast<unsigned long long>(samples), coll::collName(c), b,
             m.ranks, static_cast<unsigned long long>(calls));
    return buf;
  }
  if (!frozen()) combine(c, b, arms, false);
  return "";
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

bool Agreement::takeAnnouncement(Announcement* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (role_ != Role::Leader || flying_ || frozen()) return false;
  Announcement a;
  if (announcedStart_ == kNever) {
    // Every rank held exactly once (claims are checked as they come): only then did every rank's process join.
    if (!ownCounted_ || localRanks_.load() < 0 || owner_.size() != static_cast<size_t>(nRanks_)) return false;
    // Past every rank: followers never pass call `window` without START, and the leader's calls so far are below
    // next_ (its own gate waits at `window` for start_, which is only set once START is delivered).
    a.start = true;
    a.s = std::max(p_.window, next_ + 1);
    a.h = a.s + p_.window;
    a.decisions = initial_;
    if (a.decisions.size() > kMaxPerMessage) a.decisions.resize(kMaxPerMessage);
    processes_ = 1;
    for (const Member& m : members_) processes_ += m.ranks > 0 ? 1 : 0;
    announcedStart_ = a.s;
  } else {
    if (start_.load() == kNever || wantHorizon_ <= horizon_.load()) return false;
    a.h = wantHorizon_;
    size_t n = std::min(pending_.size(), kMaxPerMessage);
    a.decisions.assign(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  flight_ = a;
  flying_ = true;
  *out = std::move(a);
  return true;
}

bool Agreement::inFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flying_;
}

uint64_t Agreement::announcedHorizon() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flying_ ? flight_.h : start_.load() == kNever ? 0 : horizon_.load();
}

void Agreement::settle() {
  if (!flying_) return;
  flying_ = false;
  const Announcement& a = flight_;
  if (a.start) {
    publish(a.decisions, a.s);
    horizon_.store(a.h);
    wantHorizon_ = std::max(wantHorizon_, a.h);
    start_.store(a.s);
  } else {
    publish(a.decisions, a.h + 1);
    horizon_.store(a.h);
  }
  // Bounded: START, then only horizons carrying decisions (at most kMaxQueuedDecisions are ever proposed, and
  // combine() adds one per bucket).
  if (a.start || !a.decisions.empty()) log_.push_back(a);
}

void Agreement::delivered() {
  Announcement a;
  bool was = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was = flying_;
    a = flight_;
    settle();
  }
  if (!was) return;
  cv_.notify_all();
  if (a.start)
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: every rank's process joined; tuning from call %llu (%zu cached "
             "decisions agreed)", static_cast<unsigned long long>(commId_), static_cast<unsigned long long>(a.s),
             a.decisions.size());
  else
    logDecisions(a.decisions, a.h + 1, "every process takes");
}

std::vector<Agreement::Announcement> Agreement::history() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Announcement> out = log_;
  if (flying_ && (flight_.start || !flight_.decisions.empty())) out.push_back(flight_);
  uint64_t h = flying_ ? flight_.h : start_.load() == kNever ? 0 : horizon_.load();
  if (!out.empty() && out.back().h < h) {
    Announcement last;
    last.h = h;
    out.push_back(last);
  }
  return out;
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

bool Agreement::onFreeze(uint64_t from, const char* why, bool quiet) {
  bool already = frozen();
  uint64_t at = stop(why, quiet);  // the follower's own safe point: the leader's, when both hold the same stream
  return already || from == at;
}

uint64_t Agreement::stop(const char* why, bool quiet) { return freezeAt(true, 0, why, quiet); }

uint64_t Agreement::freeze(uint64_t from, const char* why, bool quiet) { return freezeAt(false, from, why, quiet); }

uint64_t Agreement::freezeAt(bool safePoint, uint64_t from, const char* why, bool quiet) {
  uint64_t now;
  bool first = false;
  std::string hint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    settle();  // an announcement handed out stays valid for the leader too (a follower may hold it)
    if (safePoint) from = start_.load() == kNever ? 0 : horizon_.load() + 1;
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
