// ncclTunerPlugin_v2 (NCCL 2.19-2.20): no cost table; the plugin returns algorithm/protocol numbers. Without
// NCCL's support information we only pass on Tree/Ring decisions (rules or cache), which every 2.19 build has.
#include "abi/export.h"
#include "abi/tuner_v2.h"
#include "adapters/tuner_common.h"

namespace {
ncclResult_t init(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFn, void** ctx) {
  return icn::adapters::tunerInit(ctx, 0, nRanks, nNodes, logFn, /*shareByCommId=*/false);
}
ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                         int numPipeOps, int* algorithm, int* protocol, int* nChannels) {
  if (!ctx || !algorithm || !protocol) return ncclSuccess;
  // Synthesize a table where only Tree/Ring x LL/LL128/Simple are selectable, then read back what was forced.
  float table[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  for (auto& row : table)
    for (float& v : row) v = -1.f;
  for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING})
    for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; ++p) table[a][p] = 1000.f + static_cast<float>(a * 3 + p);
  int ch = 0;
  icn::adapters::tunerCostTableCall(ctx, collType, nBytes, numPipeOps, reinterpret_cast<float**>(table),
                                    NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, /*regBuff=*/-2, &ch);
  for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING})
    for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; ++p)
      if (table[a][p] == 0.f) {
        *algorithm = a;
        *protocol = p;
      }
  if (ch > 0 && nChannels) *nChannels = ch;
  return ncclSuccess;
}
ncclResult_t destroy(void* ctx) { return icn::adapters::tunerFinalize(ctx); }
}  // namespace

ICN_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {"ICN", init, getCollInfo, destroy};
