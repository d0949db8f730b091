#include "tuner/demand.h"

#include <mutex>

namespace icn::tuner {
namespace {

std::atomic<void (*)(bool)> g_hook{nullptr};
std::atomic<uint64_t> g_tick{0};
// Demand and the quiet request change together under this lock, so the hook sees every flip in order.
std::mutex g_demandMu;
// The one bucket asking for the process's next call untimed (a quiet duel); any other bucket's call ends it.
struct QuietHolder {
  const void* group = nullptr;
  int c = -1, b = -1;
};
QuietHolder g_quiet;
std::atomic<bool> g_quietActive{false};  // g_quiet.group != nullptr, for the decision's lock-free check
bool g_wanted = false;  // what the hook was last told
void setQuietLocked(const QuietHolder& h) {
  g_quiet = h;
  g_quietActive.store(h.group != nullptr, std::memory_order_relaxed);
}
void updateWantedLocked() {
  bool want = measurementDemand().load() - (g_quiet.group ? 1 : 0) > 0;
  if (want == g_wanted) return;
  g_wanted = want;
  if (auto hook = g_hook.load()) hook(want);
}

}  // namespace

std::atomic<int>& measurementDemand() {
  static std::atomic<int> demand{0};
  return demand;
}
void setDemandHook(void (*hook)(bool)) { g_hook.store(hook); }
uint64_t tunerTick() { return g_tick.load(std::memory_order_relaxed); }
uint64_t advanceTunerTick() { return g_tick.fetch_add(1, std::memory_order_relaxed) + 1; }

void demandChanged(int delta) {
  std::lock_guard<std::mutex> lock(g_demandMu);
  measurementDemand().fetch_add(delta);
  updateWantedLocked();
}
void requestQuiet(const void* group, int c, int b, bool on) {
  std::lock_guard<std::mutex> lock(g_demandMu);
  bool mine = g_quiet.group == group && g_quiet.c == c && g_quiet.b == b;
  if (on == mine) return;
  setQuietLocked(on ? QuietHolder{group, c, b} : QuietHolder{});
  updateWantedLocked();
}
void noteCallForQuiet(const void* group, int c, int b) {
  if (!g_quietActive.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_demandMu);
  if (!g_quiet.group || (g_quiet.group == group && g_quiet.c == c && g_quiet.b == b)) return;
  setQuietLocked(QuietHolder{});
  updateWantedLocked();
}
void releaseQuiet(const void* group) {
  std::lock_guard<std::mutex> lock(g_demandMu);
  if (g_quiet.group != group) return;
  setQuietLocked(QuietHolder{});
  updateWantedLocked();
}
bool measurementWanted() {
  std::lock_guard<std::mutex> lock(g_demandMu);
  return measurementDemand().load() - (g_quiet.group ? 1 : 0) > 0;
}


}  // namespace icn::tuner
