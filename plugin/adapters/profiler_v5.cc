// ncclProfiler_v5 (NCCL 2.26-2.28; newer NCCL prefers v6): Coll and KernelCh events into profiler_common.
#include "abi/export.h"
#include "abi/profiler_v5.h"
#include "adapters/profiler_common.h"

namespace {
namespace prof = icn::adapters::profiler;

ncclResult_t startEvent(void* ctx, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
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

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v5_t state, ncclProfilerEventStateArgs_v5_t* a) {
  if (state != ncclProfilerKernelChStop || !a) return ncclSuccess;
  return prof::recordKernelChStop(eHandle, a->kernelCh.pTimer);
}

}  // namespace

ICN_EXPORT const ncclProfiler_v5_t ncclProfiler_v5 = {"ICN",     prof::init,       startEvent,
                                                      prof::stopEvent, recordEventState, prof::finalize};
