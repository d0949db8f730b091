// ncclTuner_v6_t (NCCL 2.30+): v5's init/getCollInfo/finalize plus an optional getChunkSize (NULL keeps NCCL's
// chunk size). Constants and NVLink domain info are v5's.
#pragma once
#include "abi/tuner_v5.h"

extern "C" {
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants);
  // collCostTable is a float[numAlgo][numProto] array passed as float**; -1.0 marks unsupported entries.
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
  // In/out *chunkSize: NCCL's chunk size for the chosen algorithm/protocol/channels; NCCL clamps what comes back.
  ncclResult_t (*getChunkSize)(void* ctx, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} ncclTuner_v6_t;
}

static_assert(sizeof(ncclTuner_v6_t) == 40);
static_assert(offsetof(ncclTuner_v6_t, init) == 8);
static_assert(offsetof(ncclTuner_v6_t, getCollInfo) == 16);
static_assert(offsetof(ncclTuner_v6_t, finalize) == 24);
static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 32);
