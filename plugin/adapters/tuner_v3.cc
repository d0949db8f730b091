// ncclTunerPlugin_v3 (NCCL 2.21): cost table without regBuff (rules with regBuff != -1 never match).
#include "abi/export.h"
#include "abi/tuner_v3.h"
#include "adapters/tuner_common.h"

namespace {
ncclResult_t init(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFn, void** ctx) {
  return icn::adapters::tunerInit(ctx, 0, nRanks, nNodes, logFn, /*shareByCommId=*/false);
}
ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                         int numAlgo, int numProto, int* nChannels) {
  return icn::adapters::tunerCostTableCall(ctx, collType, nBytes, numPipeOps, collCostTable, numAlgo, numProto,
                                           /*regBuff=*/-2, nChannels);
}
ncclResult_t destroy(void* ctx) { return icn::adapters::tunerFinalize(ctx); }
}  // namespace

ICN_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {"ICN", init, getCollInfo, destroy};
