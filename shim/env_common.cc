// libnccl-env-icn.so (NCCL_ENV_PLUGIN=icn): NCCL routes every environment read through getEnv; we answer
// NCCL_TOPO_FILE (and NCCL_GRAPH_FILE when ICN_TOPO_GRAPH is set) with our generated files unless the user set
// them, and defer to getenv() for everything else. No preload needed.
#include "shim/env_common.h"

#include <cstdlib>
#include <cstring>

#include "core/log.h"
#include "shim/injector.h"

namespace icn::shim {

void envLoaded(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, int apiVersion) {
  ICN_INFO(icn::subsys::Init | icn::subsys::Env, "env plugin: loaded by NCCL %u.%u.%u%s (env API v%d)", major, minor,
           patch, suffix ? suffix : "", apiVersion);
}

// Returned pointers are either getenv()'s or the injector's strings, which live until process exit.
const char* envGet(const char* name) {
  if (!name) return nullptr;
  const char* user = getenv(name);
  if (!strcmp(name, "NCCL_TOPO_FILE") && !Injector::userSetting(user)) {
    const char* ours = Injector::instance().topoPath();
    return ours ? ours : nullptr;
  }
  if (!strcmp(name, "NCCL_GRAPH_FILE") && !Injector::userSetting(user)) {
    const char* ours = Injector::instance().graphPath();
    return ours ? ours : nullptr;
  }
  return user;
}

}  // namespace icn::shim
