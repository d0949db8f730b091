// ncclTunerPlugin_v6 (NCCL 2.30+): v5's tuner (commId, fed by our profiler) with getChunkSize left NULL, so NCCL
// keeps its own chunk size: nothing we measured shows a better one, and a NULL hook costs NCCL no call.
#include "abi/export.h"
#include "abi/tuner_v6.h"
#include "adapters/tuner_common.h"

namespace {
ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFn,
                  ncclNvlDomainInfo_v6_t* nvl, ncclTunerConstants_v6_t* constants) {
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

ICN_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {"ICN", init, getCollInfo, finalize, nullptr};
