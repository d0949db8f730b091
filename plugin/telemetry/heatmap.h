// The live heatmap: per communicator rank, bytes/messages per peer and channel (from the net counters) and measured
// GPU times per collective bucket (from the profiler). Rendered as a versioned JSON snapshot that a small background
// thread writes atomically (unpredictable temp file + rename) at most every ICN_HEATMAP_INTERVAL_MS, so nothing on NCCL's hot
// paths does file I/O.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "telemetry/coll_stats.h"

namespace icn::telemetry {

struct CommEntry {
  uint64_t commId = 0;
  int rank = -1;
  int nranks = 0;
  CollStatsTable colls;
};

namespace heatmap {
// The profiler registers one entry per communicator rank; starts the writer when a snapshot file is configured.
std::shared_ptr<CommEntry> registerComm(uint64_t commId, int rank, int nranks);
// Writes a last snapshot; the writer thread stops with the last entry. Entries stay in the snapshot until then.
void unregisterComm(const std::shared_ptr<CommEntry>& entry);
// Snapshot of everything known now (registered entries + net counters), as the JSON documented in tuner.md.
std::string renderJson();
// Path the writer uses: ICN_HEATMAP_FILE, else <per-user runtime dir>/heatmap-<pid>.json when the tuner is on
// ($XDG_RUNTIME_DIR/icn, else /tmp/icn-<uid>: 0700, ours), else "". The default file is removed at the end.
std::string snapshotPath();
// Writes the snapshot now (mkstemp temp, mode 0600, renamed over the file). False with *why on failure.
bool writeSnapshot(const std::string& path, std::string* why);
void resetForTesting();
}  // namespace heatmap

}  // namespace icn::telemetry
