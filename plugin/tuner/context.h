// One tuner context per communicator rank (what NCCL's tuner init returns). Decision order:
//   user's NCCL_ALGO / NCCL_PROTO (we stand aside) > rules file > persisted cache > online measurement.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "tuner/group.h"
#include "tuner/store/cache_key.h"
#include "tuner/store/cost_table.h"
#include "tuner/store/rules.h"

namespace icn::tuner {

struct ContextConfig {
  GroupConfig group;
  std::string rulesPath;
  bool userForced = false;  // NCCL_ALGO or NCCL_PROTO set
  bool shareByCommId = true;  // false for ABI versions without a commId (v2-v4): private state, no profiler link
  // From the ICN_* settings and the environment (NCCL_TUNER_CONFIG_FILE, NCCL_ALGO, NCCL_PROTO).
  static ContextConfig fromEnvironment();
};

class Context {
 public:
  // Never fails: a broken rules file or cache is reported and ignored so NCCL keeps working.
  // `hints`: what the tuner API told beyond nRanks/nNodes; it keys the default per-user table.
  Context(const ContextConfig& cfg, uint64_t commId, int nRanks, int nNodes, const ShapeHints& hints = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // coll in icn::coll numbering (NCCL's ncclFunc_t). *nChannels is only written when a decision sets channels.
  void getCollInfo(int coll, uint64_t nBytes, int numPipeOps, CostTable& table, int regBuff, int* nChannels);

  Mode mode() const { return mode_; }
  bool standingAside() const { return mode_ == Mode::Off || userForced_; }
  const std::shared_ptr<Group>& group() const { return group_; }
  size_t ruleCount() const { return rules_.size(); }

 private:
  void loadRules(const std::string& path, int nRanks, int nNodes);  // a broken file is reported and ignored
  // Standing aside (ICN_TUNER=off, or NCCL_ALGO/NCCL_PROTO set): the communicator's processes still meet through
  // an agreement that tunes nothing, so the diagnosis's leader gathers every process's view.
  void joinForDiagnosis(const ContextConfig& cfg, uint64_t commId, int nRanks, int nNodes);

  Mode mode_;
  bool userForced_;
  uint64_t commId_;
  RuleTable rules_;
  std::shared_ptr<Group> group_;
  int slot_ = -1;
  uint64_t calls_ = 0;
  uint64_t commCalls_ = 0;  // this rank's calls of the communicator while it agrees with other processes
  int windowLeft_ = 0;
  std::unique_ptr<std::atomic<bool>[]> ruleWarned_;
};

}  // namespace icn::tuner
