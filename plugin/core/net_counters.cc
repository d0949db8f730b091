#include "core/net_counters.h"

#include <map>
#include <mutex>
#include <tuple>

namespace icn::netstats {
namespace {
struct Entry {
  NetCommInfo info;
  std::weak_ptr<NetCounters> live;
  std::shared_ptr<NetCounters> keep;  // counters survive the comm so the heatmap keeps closed connections
  bool closed = false;
};
std::mutex g_mu;
std::vector<Entry> g_entries;
std::map<std::tuple<uint64_t, std::string, bool>, int> g_channels;
std::map<uint64_t, int> g_ranks;
}  // namespace

std::shared_ptr<NetCounters> registerComm(NetCommInfo& info) {
  auto c = std::make_shared<NetCounters>();
  std::lock_guard lk(g_mu);
  info.channel = g_channels[{info.commId, info.peer, info.isSend}]++;
  g_entries.push_back({info, c, c, false});
  return c;
}

void unregisterComm(const std::shared_ptr<NetCounters>& counters) {
  std::lock_guard lk(g_mu);
  for (auto& e : g_entries)
    if (e.keep == counters) e.closed = true;
}

std::vector<NetCommSample> snapshot() {
  std::lock_guard lk(g_mu);
  std::vector<NetCommSample> out;
  out.reserve(g_entries.size());
  for (auto& e : g_entries)
    out.push_back({e.info, e.keep->bytes.load(std::memory_order_relaxed),
                   e.keep->messages.load(std::memory_order_relaxed), e.closed});
  return out;
}

void setLocalRank(uint64_t commId, int rank) {
  std::lock_guard lk(g_mu);
  g_ranks[commId] = rank;
}

int localRank(uint64_t commId) {
  std::lock_guard lk(g_mu);
  auto it = g_ranks.find(commId);
  return it == g_ranks.end() ? -1 : it->second;
}

void resetForTesting() {
  std::lock_guard lk(g_mu);
  g_entries.clear();
  g_channels.clear();
  g_ranks.clear();
}

}  // namespace icn::netstats
