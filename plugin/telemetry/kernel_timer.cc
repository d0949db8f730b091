#include "telemetry/kernel_timer.h"

#include <array>
#include <limits>

#include "telemetry/coll_names.h"

namespace icn::telemetry {
namespace {
// Handle: bits 62-63 kind | 50-61 timer id | 32-49 generation | 0-31 slot.
constexpr uint64_t kKindColl = 1, kKindCh = 2;
constexpr uint32_t kGenMask = 0x3FFFF;
constexpr uint32_t kMaxTimers = 4096;
constexpr int32_t kEvicting = -(1 << 20);

uint64_t kindOf(uint64_t h) { return h >> 62; }
uint32_t idOf(uint64_t h) { return static_cast<uint32_t>(h >> 50) & (kMaxTimers - 1); }
uint32_t genOf(uint64_t h) { return static_cast<uint32_t>(h >> 32) & kGenMask; }
uint32_t slotOf(uint64_t h) { return static_cast<uint32_t>(h); }

std::array<std::atomic<KernelTimer*>, kMaxTimers>& timers() {
  static std::array<std::atomic<KernelTimer*>, kMaxTimers> t{};
  return t;
}
std::atomic<uint32_t> g_nextId{1};  // id 0 unused so a zero handle never resolves

void atomicMin(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
void atomicMax(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
}  // namespace

struct KernelTimer::CollRec {
  std::atomic<bool> inUse{false};
  std::atomic<uint32_t> gen{1};
  std::atomic<int32_t> open{0};  // NCCL's Coll handle + started-but-not-stopped channels
  std::atomic<int32_t> done{0};
  std::atomic<bool> emitted{false}, collStopped{false};
  std::atomic<uint64_t> minStart{0}, maxStop{0};
  std::atomic<int32_t> validChildren{0};
  uint64_t seq = 0;
  int coll = -1, algo = -1, proto = -1, expected = 1;
  uint64_t bytes = 0;
  uint32_t epoch = 0;
  uint64_t ncclSeq = CollTiming::kNoNcclSeq;
};

struct KernelTimer::ChRec {
  std::atomic<bool> inUse{false};
  std::atomic<uint32_t> gen{1};
  uint64_t parent = 0;
  uint64_t start = 0;
  std::atomic<uint64_t> stop{0};
  std::atomic<bool> hasStop{false};
};

KernelTimer::KernelTimer(int nRanks, Sink sink, uint32_t collSlots, uint32_t chSlots)
    : nRanks_(nRanks > 0 ? nRanks : 1),
      sink_(std::move(sink)),
      nColl_(collSlots ? collSlots : 1),
      nCh_(chSlots ? chSlots : 1),
      colls_(std::make_unique<CollRec[]>(nColl_)),
      chs_(std::make_unique<ChRec[]>(nCh_)) {
  // Round-robin ids so a finalized timer's id is reused as late as possible.
  for (uint32_t i = 0; i < kMaxTimers && id_ == 0; ++i) {
    uint32_t id = g_nextId.fetch_add(1) % kMaxTimers;
    KernelTimer* expected = nullptr;
    if (id != 0 && timers()[id].compare_exchange_strong(expected, this)) id_ = id;
  }
}

KernelTimer::~KernelTimer() {
  if (id_) timers()[id_].store(nullptr);
}

uint64_t KernelTimer::encode(uint64_t kind, uint32_t gen, uint32_t slot) const {
  return (kind << 62) | (static_cast<uint64_t>(id_) << 50) | (static_cast<uint64_t>(gen & kGenMask) << 32) | slot;
}

KernelTimer* KernelTimer::owner(void* handle) {
  uint64_t h = reinterpret_cast<uint64_t>(handle);
  if (kindOf(h) == 0) return nullptr;
  return timers()[idOf(h)].load(std::memory_order_acquire);
}

void* KernelTimer::startColl(const CollStartInfo& info) {
  int c = coll::parseColl(info.func);
  if (c < 0 || id_ == 0) return nullptr;  // p2p-like or unknown: not something the tuner decides
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (uint32_t i = 0; i < nColl_; ++i) {
      uint32_t slot = collCursor_.fetch_add(1, std::memory_order_relaxed) % nColl_;
      CollRec& r = colls_[slot];
      bool expected = false;
      if (r.inUse.load(std::memory_order_relaxed) ||
          !r.inUse.compare_exchange_strong(expected, true, std::memory_order_acquire))
        continue;
      r.coll = c;
      r.algo = coll::parseAlgo(info.algo);
      r.proto = coll::parseProto(info.proto);
      r.expected = info.nChannels > 0 ? info.nChannels : 1;
      r.epoch = info.epoch;
      r.ncclSeq = info.ncclSeq;
      uint64_t tsize = coll::datatypeSize(info.datatype);
      uint64_t mult = (c == coll::kAllGather || c == coll::kReduceScatter) ? static_cast<uint64_t>(nRanks_) : 1;
      r.bytes = info.count * (tsize ? tsize : 1) * mult;
      r.done.store(0, std::memory_order_relaxed);
      r.validChildren.store(0, std::memory_order_relaxed);
      r.emitted.store(false, std::memory_order_relaxed);
      r.collStopped.store(false, std::memory_order_relaxed);
      r.minStart.store(std::numeric_limits<uint64_t>::max(), std::memory_order_relaxed);
      r.maxStop.store(0, std::memory_order_relaxed);
      r.seq = seq_.fetch_add(1, std::memory_order_relaxed);
      r.open.store(1, std::memory_order_release);
      return reinterpret_cast<void*>(encode(kKindColl, r.gen.load(std::memory_order_relaxed), slot));
    }
    // Pool full: reclaim the oldest record nobody references any more (its channels never all reported).
    CollRec* victim = nullptr;
    for (uint32_t i = 0; i < nColl_; ++i) {
      CollRec& r = colls_[i];
      if (r.inUse.load() && r.open.load() == 0 && !r.emitted.load() && (!victim || r.seq < victim->seq)) victim = &r;
    }
    int32_t zero = 0;
    if (!victim || !victim->open.compare_exchange_strong(zero, kEvicting)) break;
    evicted_.fetch_add(1, std::memory_order_relaxed);
    freeColl(*victim);
  }
  droppedNoSlot_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

KernelTimer::CollRec* KernelTimer::resolveColl(uint64_t h, uint32_t* slot) {
  if (kindOf(h) != kKindColl || idOf(h) != id_ || slotOf(h) >= nColl_) return nullptr;
  CollRec& r = colls_[slotOf(h)];
  if (!r.inUse.load(std::memory_order_acquire) || (r.gen.load(std::memory_order_acquire) & kGenMask) != genOf(h))
    return nullptr;
  if (slot) *slot = slotOf(h);
  return &r;
}

KernelTimer::ChRec* KernelTimer::resolveCh(uint64_t h) {
  if (kindOf(h) != kKindCh || idOf(h) != id_ || slotOf(h) >= nCh_) return nullptr;
  ChRec& r = chs_[slotOf(h)];
  if (!r.inUse.load(std::memory_order_acquire) || (r.gen.load(std::memory_order_acquire) & kGenMask) != genOf(h))
    return nullptr;
  return &r;
}

void KernelTimer::freeColl(CollRec& r) {
  r.gen.fetch_add(1, std::memory_order_acq_rel);
  r.open.store(0, std::memory_order_relaxed);
  r.inUse.store(false, std::memory_order_release);
}

void KernelTimer::collRelease(CollRec& r, uint32_t) {
  if (r.open.fetch_sub(1, std::memory_order_acq_rel) == 1 && r.emitted.load(std::memory_order_acquire)) freeColl(r);
}

void* KernelTimer::startKernelCh(void* parent, int channelId, uint64_t startNs) {
  uint64_t ph = reinterpret_cast<uint64_t>(parent);
  CollRec* p = resolveColl(ph, nullptr);
  if (!p) {
    stale_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  // Take a reference, then make sure the record was not recycled under us.
  if (p->open.fetch_add(1, std::memory_order_acq_rel) < 0 ||
      (p->gen.load(std::memory_order_acquire) & kGenMask) != genOf(ph)) {
    p->open.fetch_sub(1, std::memory_order_acq_rel);
    stale_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  for (uint32_t i = 0; i < nCh_; ++i) {
    uint32_t slot = chCursor_.fetch_add(1, std::memory_order_relaxed) % nCh_;
    ChRec& c = chs_[slot];
    bool expected = false;
    if (c.inUse.load(std::memory_order_relaxed) ||
        !c.inUse.compare_exchange_strong(expected, true, std::memory_order_acquire))
      continue;
    c.parent = ph;
    c.start = startNs;
    c.stop.store(0, std::memory_order_relaxed);
    c.hasStop.store(false, std::memory_order_release);
    return reinterpret_cast<void*>(encode(kKindCh, c.gen.load(std::memory_order_relaxed), slot));
  }
  droppedNoSlot_.fetch_add(1, std::memory_order_relaxed);
  collRelease(*p, 0);
  return nullptr;
}

void KernelTimer::recordKernelChStop(void* handle, uint64_t stopNs) {
  ChRec* c = resolveCh(reinterpret_cast<uint64_t>(handle));
  if (!c) return;
  c->stop.store(stopNs, std::memory_order_relaxed);
  c->hasStop.store(true, std::memory_order_release);
}

void KernelTimer::childDone(CollRec& r, uint64_t start, uint64_t stop, bool valid) {
  if (valid && stop >= start) {
    atomicMin(r.minStart, start);
    atomicMax(r.maxStop, stop);
    r.validChildren.fetch_add(1, std::memory_order_acq_rel);
  } else {
    missingTs_.fetch_add(1, std::memory_order_relaxed);
  }
  if (r.done.fetch_add(1, std::memory_order_acq_rel) + 1 != r.expected) return;
  if (r.emitted.exchange(true, std::memory_order_acq_rel)) return;
  uint64_t lo = r.minStart.load(std::memory_order_acquire), hi = r.maxStop.load(std::memory_order_acquire);
  if (r.validChildren.load(std::memory_order_acquire) == 0 || hi < lo) return;
  completed_.fetch_add(1, std::memory_order_relaxed);
  if (sink_)
    sink_(CollTiming{r.coll, r.bytes, r.algo, r.proto, r.expected, hi - lo, hi, r.seq, r.epoch, r.ncclSeq});
}

void KernelTimer::stop(void* handle) {
  uint64_t h = reinterpret_cast<uint64_t>(handle);
  if (kindOf(h) == kKindColl) {
    uint32_t slot = 0;
    CollRec* r = resolveColl(h, &slot);
    if (!r || r->collStopped.exchange(true, std::memory_order_acq_rel)) {
      if (!r) stale_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    collRelease(*r, slot);
    return;
  }
  ChRec* c = resolveCh(h);
  if (!c) {
    stale_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t parent = c->parent, start = c->start;
  bool has = c->hasStop.load(std::memory_order_acquire);
  uint64_t stopNs = c->stop.load(std::memory_order_relaxed);
  c->gen.fetch_add(1, std::memory_order_acq_rel);
  c->inUse.store(false, std::memory_order_release);
  // Our reference keeps the parent alive, so it still resolves.
  CollRec* p = resolveColl(parent, nullptr);
  if (!p) return;
  childDone(*p, start, stopNs, has);
  collRelease(*p, 0);
}

KernelTimerStats KernelTimer::stats() const {
  return KernelTimerStats{completed_.load(), droppedNoSlot_.load(), evicted_.load(), stale_.load(), missingTs_.load()};
}

}  // namespace icn::telemetry
