// ncclTuner_v3_t (NCCL 2.21): cost table without regBuff.
#pragma once
#include "abi/tuner_common.h"

extern "C" {
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} ncclTuner_v3_t;
}
static_assert(sizeof(ncclTuner_v3_t) == 32);
