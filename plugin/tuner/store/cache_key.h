// Where the learned table of a communicator shape lives by default, and what it must match to be reused.
// The key names everything that changes which choice is fastest: the NCCL version, the communicator's shape
// (nRanks, nNodes, ranks per node, NVLink domains), NCCL's tuning constants as it handed them to the tuner, this
// machine's GPUs, NICs and CPU model, the ICN transport and the NCCL_* settings that shape the topology. The file
// name carries a hash of the key and the file's header the key itself, so a changed machine, NCCL or setting
// starts a new table instead of reusing a stale one.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"

namespace icn::tuner {

// What NCCL's tuner init tells about the communicator beyond nRanks/nNodes (v5); zeros when unknown.
struct ShapeHints {
  int nvlDomains = 0, minRanksPerNvlDomain = 0, maxRanksPerNvlDomain = 0;
  uint64_t constantsHash = 0;  // hash of NCCL's tuning constants at init
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);
// The key string (one line, printable).
std::string cacheKey(int nRanks, int nNodes, const ShapeHints& hints);
// <per-user cache dir>/tuner-<hash of key>.csv; an error (with *why) when the directory is unusable.
Status defaultCachePath(const std::string& key, std::string* path, std::string* why);

}  // namespace icn::tuner
