// The env plugin's behaviour, shared by the ncclEnv_v1 and ncclEnv_v2 tables (env_v1.cc, env_v2.cc).
#pragma once
#include <cstdint>

namespace icn::shim {
void envLoaded(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, int apiVersion);
// Our topology/graph file for NCCL_TOPO_FILE / NCCL_GRAPH_FILE unless the user set them; getenv() otherwise.
const char* envGet(const char* name);
}  // namespace icn::shim
