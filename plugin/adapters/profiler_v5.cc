// ncclProfiler_v5 (NCCL 2.26-2.28; newer NCCL prefers v6): Coll and KernelCh events into profiler_common.
#include "abi/export.h"
#include "abi/profiler_v5.h"
#include "adapters/profiler_common.h"

namespace prof = icn::adapters::profiler;

ICN_EXPORT const ncclProfiler_v5_t ncclProfiler_v5 = {"ICN",           prof::init,
                                                      prof::startEvent, prof::stopEvent,
                                                      prof::recordEventState, prof::finalize};
