// ncclTuner_v2_t (NCCL 2.19-2.20): the plugin returns algorithm/protocol numbers directly (no cost table).
#pragma once
#include "abi/tuner_common.h"

extern "C" {
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} ncclTuner_v2_t;
}
static_assert(sizeof(ncclTuner_v2_t) == 32);
