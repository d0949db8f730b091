// The persisted learned table (ICN_TUNER_CACHE): a small CSV so people can read, diff and edit it.
//   # icn-tuner-cache v1
//   # key: icn-tuner-key v1 nccl=22809 nRanks=2 ...   (tables in the default directory: see cache_key.h)
//   coll,nRanks,nNodes,bucket_log2,algo,proto,channels,mean_us,samples
//   AllReduce,2,1,21,RING,LL128,0,23.8,16
// Saving merges: entries for other (nRanks, nNodes) or buckets already in the file are kept. Concurrent jobs
// serialise their merges on a lock of the file's directory (bounded wait) and replace the file atomically, so a
// reader sees the old or the new table, never a mix.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tuner/store/decision.h"

namespace icn::tuner {

struct CacheEntry {
  int coll = -1;
  int nRanks = 0, nNodes = 0;
  int bucket = 0;
  Decision decision;
  double meanUs = 0;
  uint64_t samples = 0;
  bool sameKey(const CacheEntry& o) const {
    return coll == o.coll && nRanks == o.nRanks && nNodes == o.nNodes && bucket == o.bucket;
  }
};

// `key` (may be null) gets the file's "# key:" line, empty when it has none.
Status parseCache(std::string_view text, const std::string& source, std::vector<CacheEntry>* out, std::string* why,
                  std::string* key = nullptr);
// A missing file is Ok with no entries (first run); unreadable/malformed is an error naming line and field.
// With `key` non-empty, a file whose key differs (or is missing) is stale: Ok, no entries, *why says so.
Status loadCache(const std::string& path, std::vector<CacheEntry>* out, std::string* why, const std::string& key = {});
std::string renderCache(const std::vector<CacheEntry>& entries, const std::string& key = {});
// Merges `entries` into the file (replacing same keys; a stale file under `key` is replaced whole) and writes it
// atomically through an unpredictable temporary name (mode 0600) renamed over the file.
Status saveCache(const std::string& path, const std::vector<CacheEntry>& entries, std::string* why,
                 const std::string& key = {});

}  // namespace icn::tuner
