#include "telemetry/coll_stats.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace icn::telemetry {
namespace {
size_t hashKey(const CollKey& k) {
  return (static_cast<size_t>(k.coll) * 131 + k.bucket * 31 + k.algo * 7 + k.proto) * 67 + k.channels;
}
}  // namespace

bool CollStatsTable::add(const CollKey& key, double us, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t h = hashKey(key) % kCapacity;
  for (size_t i = 0; i < kCapacity; ++i) {
    Slot& s = slots_[(h + i) % kCapacity];
    if (s.used && !(s.key == key)) continue;
    if (!s.used) {
      s.used = true;
      s.key = key;
      s.minUs = us;
    }
    s.recent[s.count % kRecent] = static_cast<float>(us);
    s.count++;
    s.sumUs += us;
    s.minUs = std::min(s.minUs, us);
    if (bytes > 0 && us > 0) {
      s.sumLogBw += std::log(static_cast<double>(bytes) / us);
      s.bwCount++;
    }
    return true;
  }
  dropped_++;
  return false;
}

std::vector<CollSummary> CollStatsTable::summaries() const {
  std::vector<CollSummary> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& s : slots_) {
    if (!s.used) continue;
    CollSummary c;
    c.key = s.key;
    c.count = s.count;
    c.meanUs = s.sumUs / static_cast<double>(s.count);
    c.minUs = s.minUs;
    c.sumUs = s.sumUs;
    c.bwCount = s.bwCount;
    c.gmBytesPerUs = s.bwCount ? std::exp(s.sumLogBw / static_cast<double>(s.bwCount)) : 0.0;
    size_t n = std::min<uint64_t>(s.count, kRecent);
    std::array<float, kRecent> tmp = s.recent;
    std::nth_element(tmp.begin(), tmp.begin() + n / 2, tmp.begin() + n);
    c.p50Us = tmp[n / 2];
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const CollSummary& a, const CollSummary& b) {
    return std::tie(a.key.coll, a.key.bucket, a.key.algo, a.key.proto, a.key.channels) <
           std::tie(b.key.coll, b.key.bucket, b.key.algo, b.key.proto, b.key.channels);
  });
  return out;
}

uint64_t CollStatsTable::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace icn::telemetry
