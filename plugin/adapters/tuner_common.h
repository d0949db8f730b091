// Glue shared by the tuner ABI adapters (v5..v2): context creation, error mapping, exception fences.
#pragma once
#include <cstdint>
#include <new>

#include "abi/tuner_common.h"
#include "core/log.h"
#include "telemetry/coll_names.h"
#include "tuner/context.h"

namespace icn::adapters {

// Collective, algorithm and protocol numbers are NCCL's, so cost-table indices and collType pass through as they are.
static_assert(coll::kAllReduce == ncclFuncAllReduce && coll::kAllGather == ncclFuncAllGather &&
              coll::kReduceScatter == ncclFuncReduceScatter && coll::kNumColls == ncclFuncAllReduce + 1);
static_assert(coll::kTree == NCCL_ALGO_TREE && coll::kRing == NCCL_ALGO_RING &&
              coll::kNumAlgos == NCCL_NUM_ALGORITHMS_V5);
static_assert(coll::kLL == NCCL_PROTO_LL && coll::kLL128 == NCCL_PROTO_LL128 && coll::kSimple == NCCL_PROTO_SIMPLE &&
              coll::kNumProtos == NCCL_NUM_PROTOCOLS_V5);

// What keys the persisted table beyond the communicator's size (v5 and later): NCCL's NVLink domains and a hash of
// its tuning constants, so a table learned under one machine shape or NCCL build is not applied to another.
template <class NvlDomainInfo, class Constants>
tuner::ShapeHints shapeHints(const NvlDomainInfo* nvl, const Constants* constants) {
  tuner::ShapeHints hints;
  if (nvl) hints = {nvl->nNvlDomains, nvl->minRanksPerNvlDomain, nvl->maxRanksPerNvlDomain, 0};
  if (constants) hints.constantsHash = tuner::fnv1a(constants, sizeof *constants);
  return hints;
}

inline ncclResult_t tunerInit(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFn,
                              bool shareByCommId, const tuner::ShapeHints& hints = {}) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  setLogSink(reinterpret_cast<LogSink>(logFn));
  try {
    tuner::ContextConfig cfg = tuner::ContextConfig::fromEnvironment();
    cfg.shareByCommId = shareByCommId;
    *ctx = new tuner::Context(cfg, commId, static_cast<int>(nRanks), static_cast<int>(nNodes), hints);
    return ncclSuccess;
  } catch (const std::bad_alloc&) {
    ICN_WARN(subsys::Tuning, "tuner: out of memory at init");
    return ncclSystemError;
  } catch (...) {
    ICN_WARN(subsys::Tuning, "tuner: unexpected failure at init");
    return ncclInternalError;
  }
}

inline ncclResult_t tunerFinalize(void* ctx) {
  try {
    delete static_cast<tuner::Context*>(ctx);  // owns the RAII state; NULL is fine
  } catch (...) {
    return ncclInternalError;
  }
  return ncclSuccess;
}

// float** is really float[numAlgo][numProto]: reinterpret, never dereference as rows. A miss is success.
inline ncclResult_t tunerCostTableCall(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                                       int numAlgo, int numProto, int regBuff, int* nChannels) {
  auto* c = static_cast<tuner::Context*>(ctx);
  if (!c || !costTable) return ncclSuccess;
  tuner::CostTable table(reinterpret_cast<float*>(costTable), numAlgo, numProto);
  c->getCollInfo(collType, nBytes, numPipeOps, table, regBuff, nChannels);
  return ncclSuccess;
}

}  // namespace icn::adapters
