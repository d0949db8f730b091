// Prometheus textfile output of the live heatmap: when ICN_PROM_DIR names a directory, a background thread rewrites
// <dir>/icn-<host>-<pid>.prom atomically (a private temp file in the same directory, then rename) every
// ICN_HEATMAP_INTERVAL_MS, for node_exporter's textfile collector. Collective metrics carry NCCL Inspector's names
// and labels where they mean the same (nccl_bus_bandwidth_gbs, nccl_collective_exec_time_microseconds); the rest
// is ours under icn_.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "telemetry/heatmap.h"

namespace icn::telemetry::prometheus {

struct CommLabels {
  std::string commName;  // NCCL's commName; "unknown" when NCCL gives none
  int nNodes = 0;
  int gpu = -1;  // CUDA device ordinal of the communicator; -1: look up the current one (unknown when none)
};

// Adds a communicator rank to the file (from the profiler's init) and starts the writer when ICN_PROM_DIR is set.
void addComm(const std::shared_ptr<CommEntry>& entry, const CommLabels& labels);
// The writer stops with the last communicator, after a final write; entries stay in the file until then.
void removeComm(const std::shared_ptr<CommEntry>& entry);
// The whole file as Prometheus text exposition format.
std::string render();
// <dir>/icn-<host>-<pid>.prom, or "" when ICN_PROM_DIR is empty.
std::string filePath();
// Writes the file now. False with *why on failure.
bool writeFile(const std::string& path, std::string* why);
void resetForTesting();

}  // namespace icn::telemetry::prometheus
