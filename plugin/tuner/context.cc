#include "tuner/context.h"

#include <cstdlib>

#include "core/log.h"
#include "core/params.h"
#include "diagnose/service.h"
#include "telemetry/coll_names.h"
#include "tuner/explore/params.h"
#include "tuner/group_registry.h"

namespace icn::tuner {
namespace {
// After settling, measure a short window now and then so drift can be seen without profiling every call.
constexpr uint64_t kSamplePeriod = 8192;  // ~0.4% of calls measured once settled
constexpr int kSampleWindow = 32;
}  // namespace

ContextConfig ContextConfig::fromEnvironment() {
  ContextConfig c;
  // Read at every communicator's init (not cached for the process): a benchmark or a framework can give
  // communicators in one process different modes, e.g. NCCL's default next to ICN online.
  const std::string mode = params::getStringNow(params::Id::Tuner);
  if (mode == "off") {
    c.group.mode = Mode::Off;
  } else if (mode == "static") {
    c.group.mode = Mode::Static;
  } else {
    if (mode != "online")
      ICN_WARN(subsys::Tuning, "ICN_TUNER=%s is not one of online|static|off; using online", mode.c_str());
    c.group.mode = Mode::Online;
  }
  c.group.cachePath = params::getStringNow(params::Id::TunerCache);
  c.group.explore = exploreParamsFromSettings();
  const std::string& skip = params::getString(params::Id::TunerModelSkip);
  char* end = nullptr;
  double ratio = std::strtod(skip.c_str(), &end);
  if (skip.empty() || end == skip.c_str() || *end != '\0' || !(ratio == 0 || (ratio >= 1.0 && ratio <= 1000.0))) {
    ICN_WARN(subsys::Tuning, "ICN_TUNER_MODEL_SKIP=%s is not 0 or a ratio in 1..1000; using 1.5", skip.c_str());
    ratio = 1.5;
  }
  c.group.modelSkipRatio = ratio;
  c.group.agree.waitMs = static_cast<int>(params::getInt(params::Id::TunerAgreeWaitMs));
  c.rulesPath = params::getString(params::Id::TunerRules);
  if (c.rulesPath.empty()) {
    const char* nccl = std::getenv("NCCL_TUNER_CONFIG_FILE");
    if (nccl) c.rulesPath = nccl;
  }
  c.userForced = std::getenv("NCCL_ALGO") != nullptr || std::getenv("NCCL_PROTO") != nullptr;
  return c;
}

Context::Context(const ContextConfig& cfg, uint64_t commId, int nRanks, int nNodes, const ShapeHints& hints)
    : mode_(cfg.group.mode), userForced_(cfg.userForced), commId_(commId) {
  if (mode_ == Mode::Off) {
    ICN_INFO(subsys::Tuning, "tuner: ICN_TUNER=off, NCCL's own model decides");
    joinForDiagnosis(cfg, commId, nRanks, nNodes);
    return;
  }
  if (userForced_) {
    ICN_INFO(subsys::Tuning, "tuner: NCCL_ALGO/NCCL_PROTO set by the user (%s/%s): the ICN tuner stands aside",
             std::getenv("NCCL_ALGO") ? std::getenv("NCCL_ALGO") : "-", std::getenv("NCCL_PROTO") ? std::getenv("NCCL_PROTO") : "-");
    joinForDiagnosis(cfg, commId, nRanks, nNodes);
    return;
  }
  if (!cfg.rulesPath.empty()) loadRules(cfg.rulesPath, nRanks, nNodes);
  GroupConfig gc = cfg.group;
  // An explicit ICN_HEATMAP_FILE keeps every collective timed: no call could go untimed.
  gc.explore = exploreParamsFor(gc.explore, nNodes, params::isSetByUser(params::Id::HeatmapFile));
  if (!cfg.shareByCommId) {
    // No commId (tuner API v2-v4): no profiler can feed us, so only rules and the cache apply.
    if (gc.mode == Mode::Online) gc.mode = Mode::Static;
    gc.cacheEverywhere = true;
    std::vector<CacheEntry> cache;
    std::string why;
    if (!gc.cachePath.empty() && loadCache(gc.cachePath, &cache, &why) != Status::Ok)
      ICN_WARN(subsys::Tuning, "tuner: ignoring the cache: %s", why.c_str());
    group_ = std::make_shared<Group>(commId, nRanks, nNodes, gc, cache);
    mode_ = gc.mode;
  } else {
    // Persistence is on by default: a per-user table keyed by everything that decides which choice is fastest.
    // ICN_TUNER_CACHE names a file instead (then the user keeps it apt for the machine).
    if (gc.cachePath.empty()) {
      std::string why;
      gc.cacheKey = cacheKey(nRanks, nNodes, hints);
      if (defaultCachePath(gc.cacheKey, &gc.cachePath, &why) != Status::Ok) {
        ICN_WARN(subsys::Tuning, "tuner: learned tables are not persisted: %s", why.c_str());
        gc.cachePath.clear();
        gc.cacheKey.clear();
      }
    }
    group_ = acquireGroup(commId, nRanks, nNodes, gc);
  }
  slot_ = group_->join();
  if (slot_ < 0) ICN_WARN(subsys::Tuning, "tuner: more than %d local ranks of one communicator; extra ranks use rules only", Group::kMaxLocal);
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx nRanks=%d nNodes=%d mode=%s cache=%s",
           static_cast<unsigned long long>(commId), nRanks, nNodes,
           mode_ == Mode::Online ? "online" : "static", gc.cachePath.empty() ? "-" : gc.cachePath.c_str());
  if (!gc.cacheKey.empty()) ICN_INFO(subsys::Tuning, "tuner: table key: %s", gc.cacheKey.c_str());
}

void Context::joinForDiagnosis(const ContextConfig& cfg, uint64_t commId, int nRanks, int nNodes) {
  const diagnose::Settings& d = diagnose::diagnoser().settings();
  if (!cfg.shareByCommId || nRanks < 2 || (d.stragglerPeriodS <= 0 && d.hangReportS <= 0)) return;
  GroupConfig gc;
  gc.mode = Mode::Off;
  gc.agree = cfg.group.agree;
  gc.agree.tunes = false;
  group_ = acquireGroup(commId, nRanks, nNodes, gc);
  slot_ = group_->join();
  group_->announceRanksForDiagnosis();
}

void Context::loadRules(const std::string& path, int nRanks, int nNodes) {
  std::vector<Rule> rules;
  std::string why;
  if (loadRulesFile(path, &rules, &why) != Status::Ok) {
    ICN_WARN(subsys::Tuning, "tuner: rules file ignored: %s", why.c_str());
    return;
  }
  rules_.build(rules, nRanks, nNodes);
  ruleWarned_ = std::make_unique<std::atomic<bool>[]>(1);
  ICN_INFO(subsys::Tuning, "tuner: %zu of %zu rules from %s apply to nRanks=%d nNodes=%d", rules_.size(),
           rules.size(), path.c_str(), nRanks, nNodes);
  if (rules_.truncatedBuckets())
    ICN_WARN(subsys::Tuning, "tuner: more than %d rules overlap some size buckets; later ones are ignored there",
             RuleTable::kPerBucket);
}

Context::~Context() {
  if (windowLeft_ > 0) demandChanged(-1);
  if (group_) group_->leave(slot_);
}

void Context::getCollInfo(int c, uint64_t nBytes, int numPipeOps, CostTable& table, int regBuff, int* nChannels) {
  if (standingAside() || c < 0 || c >= coll::kNumColls) return;
  if (const Rule* r = rules_.match(c, nBytes, numPipeOps, regBuff)) {
    if (table.force(r->decision)) {
      if (r->decision.channels > 0 && nChannels) *nChannels = r->decision.channels;
      return;
    }
    if (ruleWarned_ && !ruleWarned_[0].exchange(true)) {
      char d[48];
      ICN_WARN(subsys::Tuning, "tuner: rule at line %d asks for %s, which NCCL marks unsupported here; ignored",
               r->line, describe(r->decision, d, sizeof d));
    }
  }
  if (!group_ || slot_ < 0) return;
  int bucket = coll::bucketOf(nBytes);
  Decision d;
  if (Agreement* ag = group_->agreement()) {
    // Ranks in other processes: this call is tuned only once the leader's word covers it, and then an agreed
    // decision comes before the group's own (fixed) plan.
    if (ag->gate(commCalls_++, group_->members()) == Agreement::Gate::Untuned) return;
    d = ag->decisionAt(c, bucket, commCalls_ - 1);
  }
  if (!d.valid()) d = group_->decide(slot_, c, bucket, table);
  if (d.valid() && table.force(d) && d.channels > 0 && nChannels) *nChannels = d.channels;
  if (mode_ == Mode::Online) {
    // Bookkeeping for the drift-sampling windows (the profiler only measures while someone asks for it).
    if (windowLeft_ > 0 && --windowLeft_ == 0) demandChanged(-1);
    if (++calls_ % kSamplePeriod == 0 && windowLeft_ == 0) {
      windowLeft_ = kSampleWindow;
      demandChanged(1);
    }
  }
}

}  // namespace icn::tuner
