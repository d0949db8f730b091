#include "diagnose/registry.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace icn::diagnose::links {
namespace {

constexpr size_t kMaxSizes = 4096;  // communicators come and go in a long job: the oldest ids are forgotten

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<LinkMonitor>> open;
  std::map<std::pair<uint64_t, int>, int> sizes;  // (commId, rank) -> nranks
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: connections may close during static teardown
  return *r;
}

}  // namespace

std::shared_ptr<LinkMonitor> open(LinkInfo info) {
  auto m = std::make_shared<LinkMonitor>(std::move(info));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.open.push_back(m);
  return m;
}

void close(const std::shared_ptr<LinkMonitor>& monitor) {
  if (!monitor) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.open.erase(std::remove(r.open.begin(), r.open.end(), monitor), r.open.end());
}

std::vector<std::shared_ptr<LinkMonitor>> all() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.open;
}

void setCommSize(uint64_t commId, int rank, int nranks) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.sizes.size() >= kMaxSizes && !r.sizes.count({commId, rank})) r.sizes.erase(r.sizes.begin());
  r.sizes[{commId, rank}] = nranks;
}

std::vector<RankEntry> ranks() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::map<std::pair<uint64_t, int>, RankEntry> out;
  for (const auto& [key, n] : r.sizes) out[key] = RankEntry{key.first, key.second, n, ""};
  for (const auto& m : r.open) {
    const LinkInfo& i = m->info();
    RankEntry& e = out[{i.commId, i.rank}];
    e.commId = i.commId;
    e.rank = i.rank;
    if (e.addr.empty()) e.addr = i.addr;
  }
  std::vector<RankEntry> v;
  for (auto& [k, e] : out) v.push_back(std::move(e));
  return v;
}

void resetForTesting() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.open.clear();
  r.sizes.clear();
}

}  // namespace icn::diagnose::links
