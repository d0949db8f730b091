// Version-independent half of the profiler adapters (v5, v6): one context per communicator rank, collectives timed
// from their KernelCh events; each ncclProfiler_vN table reads its own descriptor and calls these.
#pragma once
#include <cstdint>

#include "abi/nccl_common.h"
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

}  // namespace icn::adapters::profiler
