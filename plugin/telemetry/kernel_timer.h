// Profiler event bookkeeping: turns NCCL's Coll + KernelCh events into one GPU time per collective.
//
// NCCL's order of events for one collective (2.28): Coll start (host, at launch) -> Coll stop ("enqueued", often
// before any kernel ran) -> per channel: KernelCh start (proxy thread, carries the GPU start timestamp) ->
// KernelCh stop-state (GPU stop timestamp) -> KernelCh stop. Stops may come in any order. A collective is complete
// when as many channels as its descriptor announced have stopped; its GPU time is last stop - first start.
//
// Handles are encoded integers (kind | timer id | generation | slot), not pointers: NCCL's stop/record calls carry
// no context, so the timer id finds the owner (owner()), and a stale or foreign handle is recognised and ignored
// instead of touching a recycled record. All records live in fixed pools (no allocation after
// construction); slots are claimed with CAS, so the user thread and the proxy thread never take a lock.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace icn::telemetry {

struct CollTiming {
  int coll = -1;           // icn::coll numbering
  uint64_t bytes = 0;      // the tuner's nBytes for this collective
  int algo = -1, proto = -1;
  int channels = 0;        // channels the collective really ran on
  uint64_t gpuNs = 0;      // last channel stop - first channel start
  uint64_t stopNs = 0;     // GPU timestamp of the last channel stop
  uint64_t seq = 0;        // order of the collective's Coll event among this timer's collectives
  uint32_t epoch = 0;      // CollStartInfo::epoch
  uint64_t ncclSeq = kNoNcclSeq;  // CollStartInfo::ncclSeq
  static constexpr uint64_t kNoNcclSeq = UINT64_MAX;
};

struct CollStartInfo {
  std::string_view func, datatype, algo, proto;
  uint64_t count = 0;
  int nChannels = 0;
  uint32_t epoch = 0;  // caller's tag, handed back in CollTiming (the adapter counts profiler on-phases with it)
  // NCCL's own count of this communicator's collectives of this function (profiler v5 `coll.seqNumber`), which
  // advances for untimed collectives too: it tells how many calls lie between two timed ones.
  uint64_t ncclSeq = CollTiming::kNoNcclSeq;
};

struct KernelTimerStats {
  uint64_t completed = 0, droppedNoSlot = 0, evicted = 0, staleHandles = 0, missingTimestamps = 0;
};

class KernelTimer {
 public:
  using Sink = std::function<void(const CollTiming&)>;
  KernelTimer(int nRanks, Sink sink, uint32_t collSlots = 1024, uint32_t chSlots = 8192);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  // nullptr when the collective is not one we time (unknown name) or no slot is free.
  void* startColl(const CollStartInfo& info);
  void* startKernelCh(void* parent, int channelId, uint64_t startNs);
  void recordKernelChStop(void* handle, uint64_t stopNs);
  // Stop of either kind; unknown/stale handles are ignored.
  void stop(void* handle);
  KernelTimerStats stats() const;
  // The live timer a handle belongs to; nullptr for null/foreign handles or a finalized timer.
  static KernelTimer* owner(void* handle);

 private:
  struct CollRec;
  struct ChRec;
  CollRec* resolveColl(uint64_t h, uint32_t* slot);
  ChRec* resolveCh(uint64_t h);
  void collRelease(CollRec& r, uint32_t slot);
  void freeColl(CollRec& r);
  void childDone(CollRec& r, uint64_t start, uint64_t stop, bool valid);

  uint64_t encode(uint64_t kind, uint32_t gen, uint32_t slot) const;
  uint32_t id_ = 0;
  int nRanks_;
  Sink sink_;
  uint32_t nColl_, nCh_;
  std::unique_ptr<CollRec[]> colls_;
  std::unique_ptr<ChRec[]> chs_;
  std::atomic<uint32_t> collCursor_{0}, chCursor_{0};
  std::atomic<uint64_t> seq_{0};
  mutable std::atomic<uint64_t> completed_{0}, droppedNoSlot_{0}, evicted_{0}, stale_{0}, missingTs_{0};
};

}  // namespace icn::telemetry
