// The profiler adapters (v5, v6): one context per communicator rank, collectives timed from their KernelCh events.
// The events ICN reads sit at the same offsets in every version's descriptor, so one body, instantiated over each
// version's types, fills each ncclProfiler_vN table.
#pragma once
#include <cstdint>

#include "abi/nccl_common.h"
#include "abi/profiler_v5.h"
#include "telemetry/kernel_timer.h"

namespace icn::adapters::profiler {

ncclResult_t init(void** ctx, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                  int rank, ncclDebugLogger_t logFn);
// Handles for NCCL (nullptr: not tracked). info.epoch is filled in here.
void* startColl(void* ctx, const icn::telemetry::CollStartInfo& info);
void* startKernelCh(void* ctx, void* parentObj, uint8_t channelId, uint64_t pTimer);
ncclResult_t stopEvent(void* eHandle);
ncclResult_t recordKernelChStop(void* eHandle, uint64_t pTimer);
ncclResult_t finalize(void* ctx);

// startEvent of every version: Coll and KernelCh events are tracked, the rest are not (a null handle).
template <typename EventDescr>
ncclResult_t startEvent(void* ctx, void** eHandle, EventDescr* d) {
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
    *eHandle = startColl(ctx, info);
  } else if (d->type == ncclProfileKernelCh) {
    *eHandle = startKernelCh(ctx, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
  }
  return ncclSuccess;
}

// recordEventState of every version: only a KernelCh's stop (with its GPU timestamp) matters.
template <typename EventState, typename EventStateArgs>
ncclResult_t recordEventState(void* eHandle, EventState state, EventStateArgs* a) {
  if (state != ncclProfilerKernelChStop || !a) return ncclSuccess;
  return recordKernelChStop(eHandle, a->kernelCh.pTimer);
}

}  // namespace icn::adapters::profiler
