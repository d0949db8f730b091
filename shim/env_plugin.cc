// libnccl-env-icn.so: NCCL env plugin v1 (NCCL 2.28+, NCCL_ENV_PLUGIN=icn). NCCL routes every environment
// read through getEnv; we answer NCCL_TOPO_FILE (and NCCL_GRAPH_FILE when ICN_TOPO_GRAPH is set) with our
// generated files unless the user set them, and defer to getenv() for everything else. No preload needed.
#include <cstdlib>
#include <cstring>

#include "abi/env_v1.h"
#include "core/log.h"
#include "shim/injector.h"

namespace {

ncclResult_t envInit(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  ICN_INFO(icn::subsys::Init | icn::subsys::Env, "env plugin: loaded by NCCL %u.%u.%u%s", major, minor, patch,
           suffix ? suffix : "");
  return ncclSuccess;
}

ncclResult_t envFinalize() { return ncclSuccess; }

// Returned pointers are either getenv()'s or the injector's strings, which live until process exit.
const char* envGet(const char* name) {
  if (!name) return nullptr;
  const char* user = getenv(name);
  if (!strcmp(name, "NCCL_TOPO_FILE") && !icn::shim::Injector::userSetting(user)) {
    const char* ours = icn::shim::Injector::instance().topoPath();
    return ours ? ours : nullptr;
  }
  if (!strcmp(name, "NCCL_GRAPH_FILE") && !icn::shim::Injector::userSetting(user)) {
    const char* ours = icn::shim::Injector::instance().graphPath();
    return ours ? ours : nullptr;
  }
  return user;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) ncclEnv_v1_t ncclEnvPlugin_v1 = {"icn", envInit, envFinalize, envGet};
}
