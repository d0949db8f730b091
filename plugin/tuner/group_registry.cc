#include "tuner/group_registry.h"

#include <map>
#include <mutex>

#include "core/log.h"
#include "tuner/group.h"

namespace icn::tuner {
namespace {

struct Registry {
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<Group>> groups;
  std::map<uint64_t, std::vector<int>> pendingRanks;  // noted before the group existed
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

// Every few decisions while something is measured: let idle exploring buckets of every other group give the
// profiler back (the caller parks its own). try_lock only, so a decision never waits here.
void parkIdleOtherGroups(const Group* self, uint64_t tick, uint64_t idleCalls) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (auto& [id, weak] : r.groups)
    if (auto g = weak.lock(); g && g.get() != self) g->parkIdle(tick, idleCalls);
}

std::shared_ptr<Group> acquireGroup(uint64_t commId, int nRanks, int nNodes, const GroupConfig& cfg) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.groups[commId];
  if (auto g = slot.lock()) return g;
  std::vector<CacheEntry> cache;
  if (!cfg.cachePath.empty() && cfg.mode != Mode::Off) {
    std::string why;
    if (loadCache(cfg.cachePath, &cache, &why, cfg.cacheKey) != Status::Ok) {
      ICN_WARN(subsys::Tuning, "tuner: ignoring the cache: %s", why.c_str());
      cache.clear();
    } else if (!why.empty()) {
      ICN_INFO(subsys::Tuning, "tuner: not reusing a stale table: %s", why.c_str());
    }
  }
  auto g = std::make_shared<Group>(commId, nRanks, nNodes, cfg, cache);
  slot = g;
  auto pending = r.pendingRanks.find(commId);
  if (pending != r.pendingRanks.end()) {
    for (int rank : pending->second) g->noteRank(rank);
    r.pendingRanks.erase(pending);
  }
  g->startAgreement();
  return g;
}

std::shared_ptr<Group> findGroup(uint64_t commId) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.groups.find(commId);
  return it == r.groups.end() ? nullptr : it->second.lock();
}

void noteLocalRank(uint64_t commId, int rank) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.groups.find(commId);
  if (it != r.groups.end()) {
    if (auto g = it->second.lock()) return g->noteRank(rank);
  }
  auto& v = r.pendingRanks[commId];
  if (v.size() < 64) v.push_back(rank);
}

}  // namespace icn::tuner
