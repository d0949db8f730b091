// The profiler behind every ncclProfiler_vN table: measures GPU time per collective (Coll + KernelCh events) for the
// heatmap and the tuner of the same communicator. NCCL's activation mask is process-wide and re-read for every
// collective, so we only switch events on while some tuner bucket is exploring or sampling (profiling costs a proxy
// op per channel).
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>

#include "adapters/profiler_common.h"

#include "abi/profiler_v5.h"
#include "core/log.h"
#include "core/net_counters.h"
#include "core/params.h"
#include "diagnose/registry.h"
#include "telemetry/coll_names.h"
#include "telemetry/heatmap.h"
#include "telemetry/kernel_timer.h"
#include "telemetry/period_tracker.h"
#include "telemetry/prometheus.h"
#include "tuner/group.h"
#include "tuner/group_registry.h"

namespace icn::adapters::profiler {
namespace {

constexpr int kOurEvents = ncclProfileColl | ncclProfileKernelCh;
std::atomic<int*> g_mask{nullptr};
std::atomic<bool> g_alwaysOn{false};
// Counts the phases in which events are on: collectives timed in different phases were separated by untimed
// ones, so the time between them is no per-call cost.
std::atomic<uint32_t> g_epoch{1};

void applyMask(bool wanted) {
  int* m = g_mask.load();
  if (!m) return;
  int v = (wanted || g_alwaysOn.load()) ? kOurEvents : 0;
  if (__atomic_exchange_n(m, v, __ATOMIC_RELAXED) == 0 && v != 0) g_epoch.fetch_add(1);
}

struct ProfilerCtx {
  uint64_t commId = 0;
  int rank = -1;
  std::shared_ptr<icn::telemetry::CommEntry> entry;
  std::shared_ptr<icn::tuner::Group> group;  // resolved lazily on the proxy thread (the tuner inits after us)
  uint64_t lookups = 0;
  std::unique_ptr<icn::telemetry::KernelTimer> timer;
  std::mutex periodMu;  // completions normally come from one proxy thread; this keeps it correct if not
  icn::telemetry::PeriodTracker periods;

  void onTiming(const icn::telemetry::CollTiming& t) {
    double us = static_cast<double>(t.gpuNs) / 1000.0;
    int bucket = icn::coll::bucketOf(t.bytes);
    entry->colls.add(icn::telemetry::CollKey{static_cast<int8_t>(t.coll), static_cast<int8_t>(t.algo),
                                             static_cast<int8_t>(t.proto), static_cast<uint8_t>(bucket),
                                             static_cast<uint8_t>(t.channels)},
                     us, t.bytes);
    // The tuner gets the collective's cost per call as a loop sees it: GPU time from the previous timed
    // collective's end to this one's end. Back to back that is the kernel plus whatever else the call costs
    // (launch, setup outside the kernel's work loop, host time when launches cannot keep up), the quantity
    // nccl-tests and training loops feel; the kernel's own work time alone misses what some algorithms spend
    // outside their work loop (measurements: docs/readme/tuner.md). The kernel time goes along: when launches
    // cannot keep up the periods of all candidates are the host's pace and only kernel times still tell them
    // apart. Without a timed predecessor there is no sample.
    std::array<icn::telemetry::PeriodSample, 2> ready;
    int n;
    {
      std::lock_guard<std::mutex> lock(periodMu);
      n = periods.complete(t, ready);
    }
    if (n == 0) return;
    // The registry lookup takes a process-wide lock: retry rarely until the tuner's group exists.
    if (!group && (lookups++ % 64) == 0) group = icn::tuner::findGroup(commId);
    if (!group) return;
    for (int i = 0; i < n; ++i) {
      const icn::telemetry::CollTiming& c = ready[i].timing;
      group->addSample(c.coll, icn::coll::bucketOf(c.bytes),
                       icn::tuner::Sample{c.algo, c.proto, c.channels, ready[i].periodUs,
                                          static_cast<double>(c.gpuNs) / 1000.0, ready[i].calls});
    }
  }
};

}  // namespace

ncclResult_t init(void** ctx, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                  int rank, ncclDebugLogger_t logFn) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  icn::setLogSink(reinterpret_cast<icn::LogSink>(logFn));
  try {
    icn::netstats::setLocalRank(commId, rank);
    icn::tuner::noteLocalRank(commId, rank);
    icn::diagnose::links::setCommSize(commId, rank, nranks);  // hang analysis: the ranks that never reported
    auto p = std::make_unique<ProfilerCtx>();
    p->commId = commId;
    p->rank = rank;
    p->entry = icn::telemetry::heatmap::registerComm(commId, rank, nranks);
    icn::telemetry::prometheus::addComm(p->entry, {commName ? commName : "", nNodes, -1});
    ProfilerCtx* raw = p.get();
    p->timer = std::make_unique<icn::telemetry::KernelTimer>(
        nranks, [raw](const icn::telemetry::CollTiming& t) { raw->onTiming(t); });
    // An explicit heatmap file means "measure continuously"; otherwise only while the tuner asks.
    g_alwaysOn.store(icn::params::isSetByUser(icn::params::Id::HeatmapFile));
    if (eActivationMask) g_mask.store(eActivationMask);
    icn::tuner::setDemandHook(applyMask);
    applyMask(icn::tuner::measurementWanted());
    ICN_INFO(icn::subsys::Profile | icn::subsys::Tuning, "profiler: comm 0x%llx (%s) rank %d/%d: timing collectives",
             static_cast<unsigned long long>(commId), commName ? commName : "", rank, nranks);
    *ctx = p.release();
    return ncclSuccess;
  } catch (const std::bad_alloc&) {
    return ncclSystemError;
  } catch (...) {
    return ncclInternalError;
  }
}

void* startColl(void* ctx, const icn::telemetry::CollStartInfo& info) {
  auto* p = static_cast<ProfilerCtx*>(ctx);
  if (!p) return nullptr;
  icn::telemetry::CollStartInfo i = info;
  i.epoch = g_epoch.load(std::memory_order_relaxed);
  return p->timer->startColl(i);
}

void* startKernelCh(void* ctx, void* parentObj, uint8_t channelId, uint64_t pTimer) {
  auto* p = static_cast<ProfilerCtx*>(ctx);
  return p ? p->timer->startKernelCh(parentObj, channelId, pTimer) : nullptr;
}

ncclResult_t stopEvent(void* eHandle) {
  if (auto* t = icn::telemetry::KernelTimer::owner(eHandle)) t->stop(eHandle);
  return ncclSuccess;
}

ncclResult_t recordKernelChStop(void* eHandle, uint64_t pTimer) {
  if (auto* t = icn::telemetry::KernelTimer::owner(eHandle)) t->recordKernelChStop(eHandle, pTimer);
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  std::unique_ptr<ProfilerCtx> p(static_cast<ProfilerCtx*>(ctx));
  if (!p) return ncclSuccess;
  try {
    auto s = p->timer->stats();
    uint64_t periods = 0, reordered = 0, spans = 0;
    {
      std::lock_guard<std::mutex> lock(p->periodMu);
      periods = p->periods.periods();
      reordered = p->periods.reordered();
      spans = p->periods.spans();
    }
    ICN_INFO(icn::subsys::Profile | icn::subsys::Tuning,
             "profiler: comm 0x%llx rank %d: %llu collectives timed, %llu dropped, %llu evicted, %llu stale handles; "
             "%llu periods (%llu spans over untimed calls, %llu completed after their successor)",
             static_cast<unsigned long long>(p->commId), p->rank, static_cast<unsigned long long>(s.completed),
             static_cast<unsigned long long>(s.droppedNoSlot), static_cast<unsigned long long>(s.evicted),
             static_cast<unsigned long long>(s.staleHandles), static_cast<unsigned long long>(periods),
             static_cast<unsigned long long>(spans), static_cast<unsigned long long>(reordered));
    icn::telemetry::prometheus::removeComm(p->entry);
    icn::telemetry::heatmap::unregisterComm(p->entry);
  } catch (...) {
    return ncclInternalError;
  }
  return ncclSuccess;
}

}  // namespace icn::adapters::profiler
