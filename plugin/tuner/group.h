// All tuner contexts of one communicator that live in this process (nccl-tests -g 2 puts both ranks of a
// communicator in one process). They share one decision state so every local rank makes the same choice for the
// same call. Measured winners are committed here only when *all* ranks are local; otherwise every process walks
// the same fixed plan, reports what it measured to the agreement, and the winner the leader's process decides from
// every process's measurements reaches the others through it (agree/agreement.h).
//
// Hot path: a settled bucket is one atomic word (decision + first call index it applies to); a call reads it
// lock-free. Buckets that are exploring or changing take the group's mutex, which only local ranks of the *same*
// communicator share.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "telemetry/coll_names.h"
#include "tuner/agree/agreement.h"
#include "tuner/demand.h"
#include "tuner/explore/bucket.h"
#include "tuner/explore/bucket_log.h"
#include "tuner/explore/explorer.h"
#include "tuner/store/cache.h"
#include "tuner/store/cost_table.h"

namespace icn::tuner {

// Off: NCCL decides; a group of that mode exists only to carry the diagnosis's gathering (agree/gather.cc) over
// an agreement that never tunes a call.
enum class Mode { Off, Static, Online };

// Exploring buckets that saw no call for this many process-wide decisions release the profiler.
constexpr uint64_t kParkAfterCalls = 64;
// ... or this many while a quiet duel asks for untimed calls.
constexpr uint64_t kQuietParkCalls = 4;

struct GroupConfig {
  Mode mode = Mode::Online;
  ExploreParams explore;  // as given: the plugin's contexts shape them for the communicator (explore/params.h)
  // LL candidates NCCL's model predicts over this many times its own choice are not screened where that choice is
  // predicted to take kModelSkipFromUs or more (ICN_TUNER_MODEL_SKIP; 0: screen every supported candidate).
  double modelSkipRatio = 1.5;
  std::string cachePath;
  std::string cacheKey;  // non-empty for the default per-user table: a file written under another key is stale
  AgreeParams agree;     // communicators whose ranks live in several processes
  // Tuner API v2-v4 (no commId, so no agreement): the user's ICN_TUNER_CACHE applies in every process, as a rules
  // file does; the user keeps it the same for all of them.
  bool cacheEverywhere = false;
};

class Group {
 public:
  static constexpr int kMaxLocal = 16;
  // `cache`: the persisted table. It applies at the first decision, and only when every rank of the communicator
  // lives in this process (other processes may hold other tables: only agreed decisions may differ from NCCL's).
  Group(uint64_t commId, int nRanks, int nNodes, GroupConfig cfg, const std::vector<CacheEntry>& cache);
  ~Group();  // persists the learned table
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int join();  // local slot, -1 when full
  void leave(int slot);
  void noteRank(int rank);
  int members() const { return members_.load(); }
  // Registered groups (acquireGroup) of communicators with ranks in other processes agree with those processes
  // (agree/agreement.h): the process holding rank 0 leads. Created at registration, dropped at the first call when
  // every rank turns out to be local. Null when there is nothing to agree on.
  void startAgreement();
  Agreement* agreement();
  // Mode Off: the ranks noted so far are all this process holds (no collective passes the gate to say so): a
  // follower reports them to the leader, which takes its diagnosis for them.
  void announceRanksForDiagnosis();

  // The decision for this slot's next call of (coll, bucket); `table` is this call's cost table (candidates are
  // taken from it the first time the bucket is seen). O(1) and lock-free once the bucket has settled.
  Decision decide(int slot, int coll, int bucket, const CostTable& table);
  // A measured collective (from the profiler of any local rank).
  void addSample(int coll, int bucket, const Sample& s);

  // Releases the profiler demand of exploring buckets that got no call for a while (their calls may never come
  // back: nccl-tests' warm-up touches every power of two once). They take it again on their next call.
  // Non-blocking: does nothing when the group is busy.
  void parkIdle(uint64_t tick, uint64_t idleCalls = kParkAfterCalls);
  uint64_t commId() const { return commId_; }
  int nRanks() const { return nRanks_; }
  int nNodes() const { return nNodes_; }
  bool complete() const;
  std::vector<CacheEntry> learnedEntries() const;
  // For tests and the dump tool: the decision in force for the next call of the most advanced rank.
  Decision currentDecision(int coll, int bucket) const;
  BucketExplorer::Phase phase(int coll, int bucket) const;

 private:
  // `quiet`: the bucket now asks for the next call untimed.
  // `seq`: the group's decision count with this one (a gap since the bucket's last call: other buckets ran).
  Decision slowPath(int slot, int coll, int bucket, uint64_t index, uint64_t seq, const CostTable& table, bool& quiet);
  void firstCall(int coll, int bucket, const CostTable& table);  // mutex held: candidates, then explore or settle
  SkipReport collectCandidates(int coll, int bucket, const CostTable& table, bool adaptive);  // mutex held
  void skipFarSlower(int coll, int bucket, SkipReport& report);   // mutex held
  void skipSlowLl(Bucket& b, const CostTable& table, const Decision& ncclPick, SkipReport& report);  // mutex held
  static constexpr double kModelSkipFromUs = 100.0;  // skipSlowLl: NCCL predicts its choice takes this long
  static constexpr double kSkipSlowdown = 3.0;  // arms this much slower than the fastest ...
  static constexpr double kSkipFromUs = 100.0;  // ... in a smaller bucket whose fastest call took this long
  void maybeTransition(int coll, int bucket);  // mutex held
  void startExploring(Bucket& b);  // demand on, counted as called now
  void stopExploring(Bucket& b);   // demand off, and no quiet request
  void setQuiet(const Bucket& b, bool on);
  uint64_t maxNext(int coll, int bucket) const;
  uint64_t minNext(int coll, int bucket) const;
  uint64_t planBound(int coll, int bucket) const;  // the plan must be fixed below it before the lock is let go
  uint64_t minDecided(int coll, int bucket) const;
  void logCommit(int coll, int bucket, const CommitInfo& ci, bool committed);
  void applyCache();  // first decision: settle the cached buckets when every rank is local
  // Ranks in other processes: what this process measured in a fixed plan goes to the agreement (the leader
  // combines every process's, agree/agreement.h). Mutex held.
  void reportRound(int coll, int bucket);
  bool persists() const;  // writes the table at the end: every rank local, or the agreement's leader

  std::vector<CacheEntry> cache_;
  std::atomic<bool> cacheChecked_{false};
  std::atomic<bool> allLocal_{false};  // every rank was local at the first decision

  uint64_t commId_;
  int nRanks_, nNodes_;
  GroupConfig cfg_;
  mutable std::mutex mu_;
  std::array<std::array<Bucket, coll::kNumBuckets>, coll::kNumColls> buckets_;
  std::array<std::array<std::array<std::atomic<uint64_t>, coll::kNumBuckets>, coll::kNumColls>, kMaxLocal> next_{};
  // Calls whose decision is fixed, per slot: a taken index is not decided until its caller has read the state, so
  // history may only be rewritten once every local rank has *decided* past the current decision's start.
  std::array<std::array<std::array<std::atomic<uint64_t>, coll::kNumBuckets>, coll::kNumColls>, kMaxLocal> decided_{};
  std::array<std::atomic<bool>, kMaxLocal> active_{};
  std::atomic<int> members_{0};
  std::atomic<int> held_{0};  // buckets holding measurement demand
  std::atomic<uint64_t> decides_{0};  // decisions made while something measures: tells a quiet duel its blocks were cut
  std::atomic<bool> hasRank0_{false};
  // The ranks of this communicator living here (the profiler's init tells them), for the agreement.
  static constexpr size_t kMaxNotedRanks = Agreement::kMaxLocalRanks;
  std::mutex ranksMu_;
  std::vector<int> ranks_;
  std::shared_ptr<Agreement> agree_;
  std::atomic<int> agreeState_{0};  // 0: not resolved yet, 1: in use, 2: none (every rank local)
};

}  // namespace icn::tuner
