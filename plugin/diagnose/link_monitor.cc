#include "diagnose/link_monitor.h"

#include <algorithm>
#include <cmath>

namespace icn::diagnose {
const char* dirName(Dir d) { return d == Dir::Send ? "send" : "recv"; }

LinkMonitor::LinkMonitor(LinkInfo info) : info_(std::move(info)) {}

LinkMonitor::Slot* LinkMonitor::slotOf(OpId op) {
  if (op == kNoOp) return nullptr;
  const uint32_t index = (op & 0xff) - 1;
  if (index >= static_cast<uint32_t>(kSlots)) return nullptr;
  Slot& s = slots_[index];
  if (!s.live.load(std::memory_order_relaxed) || (s.gen.load(std::memory_order_relaxed) & 0xffffff) != op >> 8)
    return nullptr;  // already done or abandoned: a late or repeated hook
  return &s;
}

OpId LinkMonitor::posted(int tag, uint64_t bytes, uint64_t tNs) {
  if (tNs > lastPostNs_.load(std::memory_order_relaxed)) lastPostNs_.store(tNs, std::memory_order_relaxed);
  if (freeMask_ == 0) {
    untracked_.fetch_add(1, std::memory_order_relaxed);
    return kNoOp;
  }
  const int i = __builtin_ctzll(freeMask_);
  freeMask_ &= ~(uint64_t{1} << i);
  Slot& s = slots_[i];
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const uint32_t gen = s.gen.load(std::memory_order_relaxed) + 1;
  s.gen.store(gen, std::memory_order_relaxed);
  s.tag.store(tag, std::memory_order_relaxed);
  s.bytes.store(bytes, std::memory_order_relaxed);
  s.bytesDone.store(0, std::memory_order_relaxed);
  s.postedNs.store(tNs, std::memory_order_relaxed);
  s.readyNs.store(0, std::memory_order_relaxed);
  s.progressNs.store(0, std::memory_order_relaxed);
  s.live.store(1, std::memory_order_relaxed);
  s.order = ++postOrder_;
  const uint32_t before = pending_.load(std::memory_order_relaxed);
  s.idlePost = before == 0;
  pending_.store(before + 1, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
  return ((gen & 0xffffff) << 8) | static_cast<uint32_t>(i + 1);
}

bool LinkMonitor::olderPending(const Slot& s) const {
  for (uint64_t used = ~freeMask_; used; used &= used - 1) {
    const Slot& o = slots_[__builtin_ctzll(used)];
    if (&o != &s && o.order < s.order) return true;
  }
  return false;
}

void LinkMonitor::noteProgress(uint64_t tNs) {
  if (tNs > lastProgressNs_.load(std::memory_order_relaxed)) lastProgressNs_.store(tNs, std::memory_order_relaxed);
}

void LinkMonitor::ready(OpId op, uint64_t tNs) {
  Slot* s = slotOf(op);
  if (!s || s->readyNs.load(std::memory_order_relaxed)) return;  // the first report wins
  const uint64_t posted = s->postedNs.load(std::memory_order_relaxed);
  const uint64_t at = std::max(tNs, posted);
  s->readyNs.store(at, std::memory_order_relaxed);
  const uint64_t start = std::max(posted, lastDoneNs_);
  const uint64_t wait = olderPending(*s) || at <= start ? 0 : at - start;
  wait_.add(wait);
  if (s->idlePost) arrival_.add(wait);
  noteProgress(at);
}

void LinkMonitor::progress(OpId op, uint64_t bytesSoFar, uint64_t tNs) {
  Slot* s = slotOf(op);
  if (!s || bytesSoFar <= s->bytesDone.load(std::memory_order_relaxed)) return;
  s->bytesDone.store(bytesSoFar, std::memory_order_relaxed);
  s->progressNs.store(tNs, std::memory_order_relaxed);
  noteProgress(tNs);
}

void LinkMonitor::release(Slot& s, int index) {
  const uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.live.store(0, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
  freeMask_ |= uint64_t{1} << index;
  pending_.store(pending_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

void LinkMonitor::done(OpId op, uint64_t bytes, uint64_t tNs) {
  Slot* s = slotOf(op);
  if (!s) return;
  const uint64_t posted = s->postedNs.load(std::memory_order_relaxed);
  const uint64_t readyNs = s->readyNs.load(std::memory_order_relaxed);
  const uint64_t start = readyNs ? std::max(readyNs, posted) : std::max(posted, lastDoneNs_);
  if (bytes >= kRateMinBytes && tNs > start) {
    const double perByteNs = static_cast<double>(tNs - start) / static_cast<double>(bytes);
    pace_.add(static_cast<uint64_t>(perByteNs * static_cast<double>(kPaceBytes)));
    rateBytesSum_.store(rateBytesSum_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  }
  lastDoneNs_ = std::max(lastDoneNs_, tNs);
  completed_.fetch_add(1, std::memory_order_relaxed);
  noteProgress(tNs);
  release(*s, static_cast<int>(s - slots_));
}

void LinkMonitor::onWire(uint64_t bytesAcked, uint64_t busyNs) {
  wireBytes_.store(wireBytes_.load(std::memory_order_relaxed) + bytesAcked, std::memory_order_relaxed);
  wireNs_.store(wireNs_.load(std::memory_order_relaxed) + busyNs, std::memory_order_relaxed);
}

void LinkMonitor::abandon(OpId op) {
  if (Slot* s = slotOf(op)) release(*s, static_cast<int>(s - slots_));
}

std::vector<PendingOp> LinkMonitor::pendingOps() const {
  std::vector<PendingOp> out;
  for (const Slot& s : slots_) {
    const uint32_t seq = s.seq.load(std::memory_order_acquire);
    if (seq & 1) continue;
    PendingOp p;
    const bool live = s.live.load(std::memory_order_relaxed);
    p.tag = s.tag.load(std::memory_order_relaxed);
    p.bytes = s.bytes.load(std::memory_order_relaxed);
    p.bytesDone = s.bytesDone.load(std::memory_order_relaxed);
    p.postedNs = s.postedNs.load(std::memory_order_relaxed);
    p.readyNs = s.readyNs.load(std::memory_order_relaxed);
    p.progressNs = s.progressNs.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!live || s.seq.load(std::memory_order_relaxed) != seq) continue;
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(), [](const PendingOp& a, const PendingOp& b) { return a.postedNs < b.postedNs; });
  return out;
}

WindowCounts LinkMonitor::takeWindow() {
  std::lock_guard<std::mutex> lock(readMu_);
  const WindowCounts now = totals();
  WindowCounts d{now.wait - lastRead_.wait, now.arrival - lastRead_.arrival, now.pace - lastRead_.pace,
                 now.rateBytes - lastRead_.rateBytes, now.wireBytes - lastRead_.wireBytes,
                 now.wireNs - lastRead_.wireNs};
  lastRead_ = now;
  return d;
}

double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

WindowFigures figures(const WindowCounts& c) {
  WindowFigures f;
  f.count = static_cast<uint32_t>(std::min<uint64_t>(c.wait.total, UINT32_MAX));
  f.waitMedianS = c.wait.quantileS(0.5);
  f.waitP90S = c.wait.quantileS(0.9);
  f.waitMeanS = c.wait.meanS();
  f.arrivals = static_cast<uint32_t>(std::min<uint64_t>(c.arrival.total, UINT32_MAX));
  f.arrivalMedianS = c.arrival.quantileS(0.5);
  f.arrivalP90S = c.arrival.quantileS(0.9);
  return f;
}

}  // namespace icn::diagnose
