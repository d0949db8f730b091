// ncclEnvPlugin_v1 (NCCL 2.28.7-2.30.4): no logger; our INFO lines go wherever ICN logs without NCCL's.
#include "abi/env_v1.h"
#include "abi/export.h"
#include "shim/env_common.h"

namespace {
ncclResult_t init(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  icn::shim::envLoaded(major, minor, patch, suffix, 1);
  return ncclSuccess;
}
ncclResult_t finalize() { return ncclSuccess; }
}  // namespace

ICN_EXPORT const ncclEnv_v1_t ncclEnvPlugin_v1 = {"icn", init, finalize, icn::shim::envGet};
