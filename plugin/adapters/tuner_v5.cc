// ncclTunerPlugin_v5 (NCCL 2.27+): the first version with a commId (v6 keeps it), so the first one our profiler
// can feed: the commId pairs a communicator's tuner with its profiler.
#include "abi/export.h"
#include "abi/tuner_v5.h"
#include "adapters/tuner_common.h"

namespace {
ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFn,
                  ncclNvlDomainInfo_v5_t* nvl, ncclTunerConstants_v5_t* constants) {
  return icn::adapters::tunerInit(ctx, commId, nRanks, nNodes, logFn, /*shareByCommId=*/true,
                                  icn::adapters::shapeHints(nvl, constants));
}
ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                         int numAlgo, int numProto, int regBuff, int* nChannels) {
  return icn::adapters::tunerCostTableCall(ctx, collType, nBytes, numPipeOps, collCostTable, numAlgo, numProto,
                                           regBuff, nChannels);
}
ncclResult_t finalize(void* ctx) { return icn::adapters::tunerFinalize(ctx); }
}  // namespace

ICN_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {"ICN", init, getCollInfo, finalize};
