// ncclProfiler_v5: measures GPU time per collective (Coll + KernelCh events) for the heatmap and the tuner of the
// same communicator. NCCL's activation mask is process-wide and re-read for every collective, so we only switch
// events on while some tuner bucket is exploring or sampling (profiling costs a proxy op per channel).
#include <atomic>
#include <memory>
#include <new>

#include "abi/profiler_v5.h"
#include "adapters/tuner_common.h"
#include "core/net_counters.h"
#include "core/params.h"
#include "telemetry/coll_names.h"
#include "telemetry/heatmap.h"
#include "telemetry/kernel_timer.h"
#include "tuner/group.h"

namespace {

constexpr int kOurEvents = ncclProfileColl | ncclProfileKernelCh;
std::atomic<int*> g_mask{nullptr};
std::atomic<bool> g_alwaysOn{false};

void applyMask(bool wanted) {
  int* m = g_mask.load();
  if (m) __atomic_store_n(m, (wanted || g_alwaysOn.load()) ? kOurEvents : 0, __ATOMIC_RELAXED);
}

struct ProfilerCtx {
  uint64_t commId = 0;
  int rank = -1;
  std::shared_ptr<icn::telemetry::CommEntry> entry;
  std::shared_ptr<icn::tuner::Group> group;  // resolved lazily on the proxy thread (the tuner inits after us)
  uint64_t lookups = 0;
  std::unique_ptr<icn::telemetry::KernelTimer> timer;

  void onTiming(const icn::telemetry::CollTiming& t) {
    double us = static_cast<double>(t.gpuNs) / 1000.0;
    int bucket = icn::coll::bucketOf(t.bytes);
    entry->colls.add(icn::telemetry::CollKey{static_cast<int8_t>(t.coll), static_cast<int8_t>(t.algo),
                                             static_cast<int8_t>(t.proto), static_cast<uint8_t>(bucket),
                                             static_cast<uint8_t>(t.channels)},
                     us);
    // The registry lookup takes a process-wide lock: retry rarely until the tuner's group exists.
    if (!group && (lookups++ % 64) == 0) group = icn::tuner::findGroup(commId);
    if (group) group->addSample(t.coll, bucket, icn::tuner::Sample{t.algo, t.proto, t.channels, us});
  }
};

ncclResult_t init(void** ctx, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                  int rank, ncclDebugLogger_t logFn) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  icn::setLogSink(reinterpret_cast<icn::LogSink>(logFn));
  try {
    icn::netstats::setLocalRank(commId, rank);
    icn::tuner::noteLocalRank(commId, rank);
    auto p = std::make_unique<ProfilerCtx>();
    p->commId = commId;
    p->rank = rank;
    p->entry = icn::telemetry::heatmap::registerComm(commId, rank, nranks);
    ProfilerCtx* raw = p.get();
    p->timer = std::make_unique<icn::telemetry::KernelTimer>(
        nranks, [raw](const icn::telemetry::CollTiming& t) { raw->onTiming(t); });
    // An explicit heatmap file means "measure continuously"; otherwise only while the tuner asks.
    g_alwaysOn.store(icn::params::isSetByUser(icn::params::Id::HeatmapFile));
    if (eActivationMask) g_mask.store(eActivationMask);
    icn::tuner::setDemandHook(applyMask);
    applyMask(icn::tuner::measurementDemand().load() > 0);
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

ncclResult_t startEvent(void* ctx, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  if (!eHandle) return ncclSuccess;
  *eHandle = nullptr;
  auto* p = static_cast<ProfilerCtx*>(ctx);
  if (!p || !d) return ncclSuccess;
  if (d->type == ncclProfileColl) {
    icn::telemetry::CollStartInfo info;
    info.func = d->coll.func ? d->coll.func : "";
    info.datatype = d->coll.datatype ? d->coll.datatype : "";
    info.algo = d->coll.algo ? d->coll.algo : "";
    info.proto = d->coll.proto ? d->coll.proto : "";
    info.count = d->coll.count;
    info.nChannels = d->coll.nChannels;
    *eHandle = p->timer->startColl(info);
  } else if (d->type == ncclProfileKernelCh) {
    *eHandle = p->timer->startKernelCh(d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
  }
  return ncclSuccess;
}

ncclResult_t stopEvent(void* eHandle) {
  if (auto* t = icn::telemetry::KernelTimer::owner(eHandle)) t->stop(eHandle);
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v5_t state, ncclProfilerEventStateArgs_v5_t* a) {
  if (state != ncclProfilerKernelChStop || !a) return ncclSuccess;
  if (auto* t = icn::telemetry::KernelTimer::owner(eHandle)) t->recordKernelChStop(eHandle, a->kernelCh.pTimer);
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  std::unique_ptr<ProfilerCtx> p(static_cast<ProfilerCtx*>(ctx));
  if (!p) return ncclSuccess;
  try {
    auto s = p->timer->stats();
    ICN_INFO(icn::subsys::Profile | icn::subsys::Tuning,
             "profiler: comm 0x%llx rank %d: %llu collectives timed, %llu dropped, %llu evicted, %llu stale handles",
             static_cast<unsigned long long>(p->commId), p->rank, static_cast<unsigned long long>(s.completed),
             static_cast<unsigned long long>(s.droppedNoSlot), static_cast<unsigned long long>(s.evicted),
             static_cast<unsigned long long>(s.staleHandles));
    icn::telemetry::heatmap::unregisterComm(p->entry);
  } catch (...) {
    return ncclInternalError;
  }
  return ncclSuccess;
}

}  // namespace

ICN_EXPORT const ncclProfiler_v5_t ncclProfiler_v5 = {"ICN", init, startEvent, stopEvent, recordEventState, finalize};
