// ncclProfiler_v6 (NCCL 2.29+): the v5 events through v6's descriptor. Copy-engine collective events (CeColl,
// CeSync, CeBatch) stay off: the tuner never chooses how such a collective runs, and NCCL times them on the host
// only, so they would add cost without feeding any decision.
#include "abi/export.h"
#include "abi/profiler_v6.h"
#include "adapters/profiler_common.h"

namespace prof = icn::adapters::profiler;

ICN_EXPORT const ncclProfiler_v6_t ncclProfiler_v6 = {"ICN",           prof::init,
                                                      prof::startEvent, prof::stopEvent,
                                                      prof::recordEventState, prof::finalize};
