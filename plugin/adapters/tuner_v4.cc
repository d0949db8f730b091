// ncclTunerPlugin_v4 (NCCL 2.22-2.26): no commId, so rules and the persisted table only.
#include "abi/export.h"
#include "abi/tuner_v4.h"
#include "adapters/tuner_common.h"

namespace {
ncclResult_t init(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFn, void** ctx) {
  return icn::adapters::tunerInit(ctx, 0, nRanks, nNodes, logFn, /*shareByCommId=*/false);
}
ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                         int numAlgo, int numProto, int regBuff, int* nChannels) {
  return icn::adapters::tunerCostTableCall(ctx, collType, nBytes, numPipeOps, collCostTable, numAlgo, numProto,
                                           regBuff, nChannels);
}
ncclResult_t destroy(void* ctx) { return icn::adapters::tunerFinalize(ctx); }
}  // namespace

ICN_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {"ICN", init, getCollInfo, destroy};
