// Registry of per-connection counters. Registration happens at connect/accept time (never on the data path), so a
// process-wide mutex is fine here; the counters themselves are bumped lock-free by their owning comm.
#include "core/net_counters.h"

#include <algorithm>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace icn {
namespace {

constexpr size_t kMaxClosedKept = 1024;  // closed connections stay visible in snapshots, bounded

struct Entry {
  NetCommInfo info;
  std::shared_ptr<NetCounters> counters;
  bool closed = false;
};

struct Registry {
  std::mutex mu;
  std::vector<Entry> entries;
  std::unordered_map<uint64_t, int> ranks;  // commId -> rank; kAmbiguous when several local ranks share it
};

constexpr int kAmbiguous = -2;

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: transports may unregister during static teardown
  return *r;
}

}  // namespace

namespace netstats {

std::shared_ptr<NetCounters> registerComm(NetCommInfo& info) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // Channel = smallest ordinal not used by an open connection to the same peer in the same direction.
  std::vector<int> used;
  for (const Entry& e : r.entries) {
    if (!e.closed && e.info.commId == info.commId && e.info.peer == info.peer && e.info.isSend == info.isSend &&
        e.info.peerRank == info.peerRank)
      used.push_back(e.info.channel);
  }
  int ch = 0;
  while (std::find(used.begin(), used.end(), ch) != used.end()) ++ch;
  info.channel = ch;
  if (info.localRank < 0) {
    auto it = r.ranks.find(info.commId);
    if (it != r.ranks.end() && it->second >= 0) info.localRank = it->second;
  }
  auto counters = std::make_shared<NetCounters>();
  r.entries.push_back(Entry{info, counters, false});
  return counters;
}

void unregisterComm(const std::shared_ptr<NetCounters>& counters) {
  if (!counters) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t closed = 0;
  for (Entry& e : r.entries) {
    if (e.counters == counters) e.closed = true;
    closed += e.closed ? 1 : 0;
  }
  // Forget the oldest closed connections beyond the bound.
  for (auto it = r.entries.begin(); closed > kMaxClosedKept && it != r.entries.end();) {
    if (it->closed) {
      it = r.entries.erase(it);
      --closed;
    } else {
      ++it;
    }
  }
}

namespace {
struct RailRegistry {
  std::mutex mu;
  std::vector<std::tuple<std::string, RailKind, std::shared_ptr<RailCounters>>> rails;
};
RailRegistry& rails() {
  static RailRegistry* r = new RailRegistry();  // never destroyed, like the registry above
  return *r;
}
constexpr size_t kMaxRailNames = 64;
}  // namespace

std::shared_ptr<RailCounters> railCounters(const std::string& ifname, RailKind kind) {
  RailRegistry& r = rails();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [name, k, c] : r.rails)
    if (name == ifname && k == kind) return c;
  if (r.rails.size() >= kMaxRailNames) return nullptr;
  r.rails.emplace_back(ifname, kind, std::make_shared<RailCounters>());
  return std::get<2>(r.rails.back());
}

std::vector<RailSample> railSnapshot() {
  RailRegistry& r = rails();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<RailSample> out;
  for (auto& [name, kind, c] : r.rails)
    out.push_back({name, kind, c->bytes.load(std::memory_order_relaxed), c->givenUp.load(std::memory_order_relaxed),
                   c->back.load(std::memory_order_relaxed)});
  return out;
}

std::vector<NetCommSample> snapshot() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<NetCommSample> out;
  out.reserve(r.entries.size());
  for (const Entry& e : r.entries) {
    NetCommSample s{e.info, e.counters->bytes.load(std::memory_order_relaxed),
                    e.counters->messages.load(std::memory_order_relaxed), e.closed};
    if (s.info.localRank < 0) {
      auto it = r.ranks.find(s.info.commId);
      if (it != r.ranks.end() && it->second >= 0) s.info.localRank = it->second;
    }
    out.push_back(std::move(s));
  }
  return out;
}

void setLocalRank(uint64_t commId, int rank) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto [it, inserted] = r.ranks.emplace(commId, rank);
  // Several ranks of one communicator in this process (e.g. nccl-tests -g 2): the rank is no longer implied by
  // the commId alone, so report "unknown" rather than a wrong rank.
  if (!inserted && it->second != rank) it->second = kAmbiguous;
}

int localRank(uint64_t commId) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.ranks.find(commId);
  return it == r.ranks.end() || it->second < 0 ? -1 : it->second;
}

void resetForTesting() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.clear();
  r.ranks.clear();
}

}  // namespace netstats
}  // namespace icn
