// Generates, once per process, the NCCL topology file (and the graph file when ICN_TOPO_GRAPH asks for one)
// that the LD_PRELOAD shim and the env plugin point NCCL at. Thread-safe; never throws; on any failure it
// logs and injects nothing, so NCCL falls back to its own detection.
#pragma once
#include <mutex>
#include <string>

namespace icn::shim {

class Injector {
 public:
  static Injector& instance();

  // Generated NCCL_TOPO_FILE / NCCL_GRAPH_FILE paths; nullptr when nothing is injected.
  const char* topoPath();
  const char* graphPath();
  // The LD_PRELOAD path: sets NCCL_TOPO_FILE / NCCL_GRAPH_FILE in the environment unless the user did.
  void applyToEnvironment();
  // True when `value` of NCCL_TOPO_FILE/NCCL_GRAPH_FILE is a user's setting (not a stale file of ours that
  // a parent process left in the environment we inherited).
  static bool userSetting(const char* value);

  Injector(const Injector&) = delete;
  Injector& operator=(const Injector&) = delete;
  ~Injector();

 private:
  Injector() = default;
  void generate();

  std::once_flag once_, envOnce_;
  int topoFd_ = -1, graphFd_ = -1;
  std::string topoPath_, graphPath_, tempFiles_[2];
};

}  // namespace icn::shim
