// Agreement across processes: the state one process keeps for one communicator whose ranks live in several
// processes (and hosts). Every rank of a communicator must make the same choice for the same call, or NCCL hangs;
// measurements differ between processes, so one process (the leader: the one holding rank 0) decides and the
// others (followers) apply what it announced. The protocol, its bounds and the argument why it cannot diverge
// (and what it assumes) are in docs/readme/tuner.md ("Agreement across processes"). In short:
//
//   - Calls of the communicator are numbered k = 0, 1, ... on every rank (NCCL asks the tuner once per collective,
//     in the same order on every rank).
//   - Before the leader's START, calls are untuned (NCCL's choice). START(S) says: from call S on, the tuner
//     decides (deterministic fixed plans, plus agreed decisions). S is past every rank's position: followers never
//     pass call `window` without START, and the leader picks S >= window and beyond its own position.
//   - A horizon H (from START, then HORIZON messages) covers calls <= H: no rank runs a tuned call beyond the
//     horizon it holds. A decision sent with horizon H takes effect at H + 1, so every rank gets it before it may
//     run that call. The leader advances the horizon `window` calls ahead of itself, half a window before it is
//     reached.
//   - A rank at a call it holds no horizon for waits at most `waitMs` for one; then it freezes: decisions from
//     H + 1 on are void for it, it tells the leader (DROP), and the leader freezes the same way and tells the
//     others (FREEZE). A frozen communicator keeps the decisions in force before the freeze point, finishes its
//     fixed plans (every rank computes them alike) and never waits again.
//   - Nobody is trusted about ranks: each process says which ranks it holds (MEMBERS), the leader accepts each rank
//     once (its own included) and starts only when every rank is held exactly once. A claim it cannot accept, a
//     process joining after START, or a report no member could have made is a lie: the leader stops the agreement
//     at the one call no rank can have passed (stop(): its announced horizon + 1, or 0 before START), and a late
//     joiner first gets everything announced so far, so it makes the same choices up to there.
//
// Threads: gate()/decisionAt() run on NCCL's threads (lock-free unless a wait is needed), the on*() handlers and
// take*() on the agreement service's thread.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "telemetry/coll_names.h"
#include "tuner/explore/explorer.h"
#include "tuner/store/decision.h"

namespace icn::tuner {

struct AgreeParams {
  uint64_t window = 1024;  // ICN_TUNER_AGREE_WINDOW: calls a horizon reaches ahead of the leader
  int waitMs = 50;         // ICN_TUNER_AGREE_WAIT_MS: longest a call waits for a horizon
  // Longest the call at `window` waits for START, once per communicator: every process must have found the leader
  // by then (its file, a TCP connect, the secret's proof), and a job's start can spare a second better than a
  // communicator left untuned for the whole job.
  int startWaitMs = 1000;
  // Combining the processes' measurements (the explorer's rules for one process, ExploreParams): an arm counts
  // where every process measured it with minSamples usable samples, and leaves NCCL's choice only when its
  // slowest process's time beats NCCL's choice's by `margin`.
  int minSamples = 2;
  double margin = 0.03;
  // False when the agreement tunes nothing and only carries the diagnosis's gathering (ICN_TUNER=off): no call
  // waits on its replies, so the service thread need not wake often for it.
  bool tunes = true;
};

// What the leader decided from every process's measurements of one (collective, bucket), for the persisted table.
struct AgreedWinner {
  int coll = -1, bucket = -1;
  Decision d;
  double us = 0;  // the slowest process's estimate for d
  int processes = 0;
};

// A decision for one (collective, bucket), as it travels.
struct AgreedDecision {
  int coll = -1, bucket = -1;
  Decision d;
};

class Agreement {
 public:
  enum class Role : uint8_t { Leader, Follower };
  enum class Gate : uint8_t { Untuned, Tuned };
  static constexpr uint64_t kNever = UINT64_MAX;
  static constexpr int kMaxPerBucket = 8;

  // `initial`: the leader's persisted table, announced with START (followers pass none).
  Agreement(uint64_t commId, int nRanks, Role role, const AgreeParams& p, std::vector<AgreedDecision> initial = {});

  uint64_t commId() const { return commId_; }
  int nRanks() const { return nRanks_; }
  Role role() const { return role_; }
  const AgreeParams& params() const { return p_; }

  // Before call k of a local rank (`localRanks`: ranks of the communicator in this process). Tuned: the group's
  // plan and the agreed decisions decide call k; Untuned: NCCL's choice. Waits at most waitMs.
  Gate gate(uint64_t k, int localRanks);
  // The ranks noted so far are all `localRanks` this process holds (once; gate() says so at the first call): a
  // follower reports them, the leader may count them for START.
  void countLocalRanks(int localRanks);
  // The agreed decision in force at call k for (coll, bucket); invalid when none. Lock-free.
  Decision decisionAt(int coll, int bucket, uint64_t k) const;
  // Leader: a measured winner to announce with the next horizon (it takes effect one horizon later). At most
  // kMaxQueuedDecisions over the agreement's life; later ones are dropped.
  void propose(int coll, int bucket, const Decision& d);
  // This process's measurements of (coll, bucket) after its fixed plan (`ncclPick`: NCCL's own choice there).
  // A collective takes as long as its slowest rank, so the leader combines every process's report per arm by the
  // slowest (largest) estimate and announces the arm whose slowest time is least; followers send theirs to it.
  // Once per (coll, bucket); later reports of the same bucket are ignored.
  void report(int coll, int bucket, std::span<const ArmEstimate> arms, const Decision& ncclPick);
  // Leader: the winners decided so far.
  std::vector<AgreedWinner> winners() const;

  bool frozen() const { return frozenFrom_.load() != kNever; }
  // The freeze came from a normal end (a process finalized the communicator), not a failure.
  bool frozenQuietly() const { return quietFreeze_.load(); }
  uint64_t frozenFrom() const { return frozenFrom_.load(); }
  uint64_t start() const { return start_.load(); }
  uint64_t horizon() const { return horizon_.load(); }

  // ---- the service's side ----
  // Wakes the service thread (set by the service when it attaches).
  void setWake(std::function<void()> wake);
  // A rank of the communicator living in this process (the profiler's init tells it; at most kMaxLocalRanks).
  // The leader counts its own ranks as held by it; a follower reports them (MEMBERS) at its first call.
  void noteRank(int rank);
  std::vector<int> ranks() const;  // sorted

  // Leader: a follower proved the secret. Member: *id names it from now on. Late: START is out, so every rank was
  // held before it came and somebody lied about its ranks; the caller sends it history() and stops the agreement.
  // TooMany: more processes than the communicator has ranks (no id given).
  enum class Join : uint8_t { Member, Late, TooMany };
  Join join(const std::string& name, int* id);
  // Leader: follower `id` holds `ranks` (sorted, distinct, at most kMaxLocalRanks: the wire's checks). "" when
  // accepted; otherwise the lie (a rank out of range or held by another process, named), which the caller acts on.
  std::string claimRanks(int id, std::span<const int> ranks);
  // Leader: follower `id`'s report (the wire checked ranges, no arm twice, at most kMaxArms). "" when accepted;
  // otherwise the lie: it holds no rank, START is not out, or it counts more samples than its ranks can have taken
  // in the calls announced so far. Reports beyond the processes counted at START change nothing.
  std::string onReport(int id, int coll, int bucket, std::span<const ArmEstimate> arms);
  // What the leader announces, as it travels: START (s, h, decisions in force from s) or HORIZON (h, decisions in
  // force from h + 1).
  struct Announcement {
    bool start = false;
    uint64_t s = 0, h = 0;
    std::vector<AgreedDecision> decisions;
  };
  // Leader: the next announcement (false: none due, or one still in flight). It is in flight until delivered():
  // the leader's own calls use it only then.
  bool takeAnnouncement(Announcement* out);
  // Leader: the announcement in flight reached every follower's socket.
  void delivered();
  bool inFlight() const;
  // Leader: every announcement so far (with the one in flight), for a follower that joins late.
  std::vector<Announcement> history() const;
  // Leader: the highest horizon any follower may hold (the one in flight included); 0 before START.
  uint64_t announcedHorizon() const;
  // Follower: messages from the leader. False when a message breaks the protocol (the caller freezes).
  bool onStart(uint64_t s, uint64_t h, const std::vector<AgreedDecision>& decisions);
  bool onHorizon(uint64_t h, const std::vector<AgreedDecision>& decisions);
  // Follower: the leader's FREEZE at `from`. The follower freezes at its own safe point (its horizon + 1, 0 before
  // START), which is the leader's when both hold the same stream; false when `from` differs from it.
  bool onFreeze(uint64_t from, const char* why, bool quiet);
  // Follower: a report to send now (false: none).
  bool takeReport(int* coll, int* bucket, std::vector<ArmEstimate>* arms);
  // Stops the agreement at the first call no rank can have passed: 0 before START, else the horizon announced + 1
  // (the leader first counts an announcement in flight as delivered: a follower may hold it). Returns that call.
  // `why` goes to the WARN line; `quiet`: a normal end (a process finalized), INFO only.
  uint64_t stop(const char* why, bool quiet = false);
  // Freezes at `from` (never later than a freeze already in force); returns the freeze point now in force.
  uint64_t freeze(uint64_t from, const char* why, bool quiet = false);
  // A follower that gave up waiting: true once, with the horizon it held (kNever: it never got START); the service
  // sends DROP with it.
  bool takeDrop(uint64_t* horizon);
  // Said with the WARN when the agreement never starts (where the rendezvous may not reach other hosts).
  void setWaitHint(std::string hint);
  // The local ranks' count once the first call came (followers report their ranks then); -1 before.
  int localRanks() const { return localRanks_.load(); }

  static constexpr int kMaxLocalRanks = 64;       // ranks one process may hold (MEMBERS)
  static constexpr int kMaxMembers = 16384;       // follower processes one leader takes
  static constexpr size_t kMaxPerMessage = 500;   // decisions one announcement carries (the rest wait for the next)
  static constexpr size_t kMaxQueuedDecisions = coll::kNumColls * coll::kNumBuckets * kMaxPerBucket;

 private:
  bool waitFor(const std::function<bool()>& ready, int ms);
  void publish(const std::vector<AgreedDecision>& ds, uint64_t from);  // mu_ held
  // One INFO line per decision in force from call `from` ("<what> <decision> from call N").
  void logDecisions(const std::vector<AgreedDecision>& decisions, uint64_t from, const char* what) const;
  void wake();
  // stop() (`safePoint`) or freeze(from), in one step: nothing can be announced between choosing the point and
  // freezing there.
  uint64_t freezeAt(bool safePoint, uint64_t from, const char* why, bool quiet);
  // mu_ held: counts the announcement in flight as delivered (publishes it, moves the horizon).
  void settle();
  // Leader, mu_ held: this process's rank `r`; a follower that claimed it lied.
  std::string claimOwn(int r);
  // Leader, mu_ held: adds one process's report; decides once every process reported.
  void combine(int coll, int bucket, std::span<const ArmEstimate> arms, bool local);

  const uint64_t commId_;
  const int nRanks_;
  const Role role_;
  const AgreeParams p_;
  std::vector<AgreedDecision> initial_;

  std::atomic<uint64_t> start_{kNever};
  std::atomic<uint64_t> horizon_{0};  // valid once start_ is set
  std::atomic<uint64_t> frozenFrom_{kNever};
  std::atomic<int> localRanks_{-1};
  std::atomic<bool> quietFreeze_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> wake_;
  std::string hint_;
  // Leader.
  uint64_t next_ = 0;          // calls the leader's ranks have asked about (max over local ranks)
  bool flying_ = false;        // an announcement handed to the service, not yet delivered
  Announcement flight_;
  std::vector<Announcement> log_;  // START and every horizon that carried decisions, for late joiners
  uint64_t wantHorizon_ = 0;   // horizon the leader's progress asks for
  std::vector<AgreedDecision> pending_;
  size_t proposed_ = 0;
  std::vector<int> ranks_;     // this process's ranks, sorted
  // Who holds each rank (member id; 0: this process), and the followers that joined.
  struct Member {
    std::string name;
    int ranks = 0;
  };
  std::vector<Member> members_;  // id - 1
  std::unordered_map<int, int> owner_;
  bool ownCounted_ = false;      // the leader's first call came: its ranks are all noted
  uint64_t announcedStart_ = kNever;  // START's call once it is handed out (delivered or not)
  int processes_ = 0;  // set with START: the leader's process and every follower holding ranks
  static constexpr int kSlots = coll::kNumAlgos * coll::kNumProtos;
  struct Combined {
    uint16_t reports = 0;
    bool leaderIn = false, done = false;
    Decision nccl;
    std::array<float, kSlots> worst{};    // per (algo, proto): the largest estimate any process reported
    std::array<uint16_t, kSlots> seen{};  // processes that measured it with minSamples
  };
  std::array<std::array<Combined, coll::kNumBuckets>, coll::kNumColls> combined_{};
  std::vector<AgreedWinner> winners_;
  std::array<std::array<bool, coll::kNumBuckets>, coll::kNumColls> reported_{};  // this process's reports
  // Follower: reports waiting for the service.
  struct Report {
    int coll, bucket;
    std::vector<ArmEstimate> arms;
  };
  std::vector<Report> outbox_;
  // Follower.
  uint64_t dropAt_ = kNever;
  bool dropPending_ = false;

  // Decisions in force, per (coll, bucket): up to kMaxPerBucket, in increasing order of the call they take effect
  // at. Word: bit 0 valid | algo+1 (4 bits) | proto+1 (3 bits) | channels (8 bits) | first call (48 bits).
  struct Slot {
    std::atomic<int> n{0};
    std::array<std::atomic<uint64_t>, kMaxPerBucket> w{};
  };
  std::array<std::array<Slot, coll::kNumBuckets>, coll::kNumColls> table_{};
};

}  // namespace icn::tuner
