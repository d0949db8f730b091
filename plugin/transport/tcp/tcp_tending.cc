#include "transport/tcp/tcp_tending.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace icn::tcp {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<Tended*> all;
  std::atomic<int64_t> nextNs{0};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void Tended::called(int64_t nowNs) {
  const std::thread::id me = std::this_thread::get_id();
  if (caller_.load(std::memory_order_relaxed) != me) caller_.store(me, std::memory_order_relaxed);
  lastCallNs_ = nowNs;
  Tending::tendOthers(this, nowNs);
}

void Tending::enroll(Tended* t) {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  r.all.push_back(t);
}

void Tending::leave(Tended* t) {
  Registry& r = registry();
  std::lock_guard lk(r.mu);  // waits for a tend of t on another thread to end
  r.all.erase(std::remove(r.all.begin(), r.all.end(), t), r.all.end());
}

void Tending::tendOthers(const Tended* self, int64_t nowNs) {
  Registry& r = registry();
  int64_t next = r.nextNs.load(std::memory_order_relaxed);
  if (nowNs < next || !r.nextNs.compare_exchange_strong(next, nowNs + kTendEveryNs, std::memory_order_relaxed))
    return;
  std::unique_lock lk(r.mu, std::try_to_lock);
  if (!lk.owns_lock()) return;
  const std::thread::id me = std::this_thread::get_id();
  // Held during the tends: a connection's destructor (leave) on another thread waits for them.
  for (Tended* t : r.all) {
    if (t == self || t->caller_.load(std::memory_order_relaxed) != me) continue;
    if (nowNs - t->lastCallNs_ < kTendQuietNs || !t->recoveryPending()) continue;
    t->tend();
  }
}

}  // namespace icn::tcp
