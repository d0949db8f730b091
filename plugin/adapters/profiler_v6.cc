// ncclProfiler_v6 (NCCL 2.29+): the v5 events through v6's descriptor. Copy-engine collective events (CeColl,
// CeSync, CeBatch) stay off: the tuner never chooses how such a collective runs, and NCCL times them on the host
// only, so they would add cost without feeding any decision.
#include "abi/export.h"
#include "abi/profiler_v6.h"
#include "adapters/profiler_common.h"

namespace {
namespace prof = icn::adapters::profiler;

ncclResult_t startEvent(void* ctx, void** eHandle, ncclProfilerEventDescr_v6_t* d) {
  if (!eHandle) return ncclSuccess;
  *eHandle = nullptr;
  if (!ctx || !d) return ncclSuccess;
  if (d->type == ncclProfileColl) {
    icn::telemetry::CollStartInfo info;
    info.func = d->coll.func ? d->coll.func : "";
    info.datatype = d->coll.datatype ? d->coll.datatype : "";
    info.algo = d->coll.algo ? d->coll.algo : "";
    info.proto = d->coll.proto ? d->coll.proto : "";
    info.count = d->coll.count;
    info.nChannels = d->coll.nChannels;
    info.ncclSeq = d->coll.seqNumber;
    *eHandle = prof::startColl(ctx, info);
  } else if (d->type == ncclProfileKernelCh) {
    *eHandle = prof::startKernelCh(ctx, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
  }
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v6_t state, ncclProfilerEventStateArgs_v6_t* a) {
  if (state != ncclProfilerKernelChStop || !a) return ncclSuccess;
  return prof::recordKernelChStop(eHandle, a->kernelCh.pTimer);
}

}  // namespace

ICN_EXPORT const ncclProfiler_v6_t ncclProfiler_v6 = {"ICN",     prof::init,       startEvent,
                                                      prof::stopEvent, recordEventState, prof::finalize};
