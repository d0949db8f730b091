// ncclTuner_v5_t (NCCL 2.27+/2.28): per-communicator init with commId, NVLink domain info and the model constants.
#pragma once
#include "abi/tuner_common.h"

extern "C" {
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  // collCostTable is a float[numAlgo][numProto] array passed as float**; -1.0 marks unsupported entries.
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
} ncclTuner_v5_t;
}

static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12);
static_assert(sizeof(ncclTunerConstants_v5_t) == 1152);
static_assert(offsetof(ncclTunerConstants_v5_t, hwLatencies) == 168);
static_assert(offsetof(ncclTunerConstants_v5_t, llMaxBws) == 672);
static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 1056);
static_assert(sizeof(ncclTuner_v5_t) == 32);
static_assert(offsetof(ncclTuner_v5_t, finalize) == 24);
