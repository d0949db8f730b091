// ncclEnvPlugin_v2 (NCCL 2.30.7+): as v1, and NCCL's logger carries our lines into NCCL's log (NCCL_DEBUG).
#include "abi/env_v2.h"
#include "abi/export.h"
#include "core/log.h"
#include "shim/env_common.h"

namespace {
ncclResult_t init(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, ncclDebugLogger_t logFn) {
  if (logFn) icn::setLogSink(reinterpret_cast<icn::LogSink>(logFn));
  icn::shim::envLoaded(major, minor, patch, suffix, 2);
  return ncclSuccess;
}
ncclResult_t finalize() { return ncclSuccess; }
}  // namespace

ICN_EXPORT const ncclEnv_v2_t ncclEnvPlugin_v2 = {"icn", init, finalize, icn::shim::envGet};
