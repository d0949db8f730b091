// The persisted learned table (ICN_TUNER_CACHE): a small CSV so people can read, diff and edit it.
//   # icn-tuner-cache v1
//   coll,nRanks,nNodes,bucket_log2,algo,proto,channels,mean_us,samples
//   AllReduce,2,1,21,RING,LL128,0,23.8,16
// Saving merges: entries for other (nRanks, nNodes) or buckets already in the file are kept.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tuner/decision.h"

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

Status parseCache(std::string_view text, const std::string& source, std::vector<CacheEntry>* out, std::string* why);
// A missing file is Ok with no entries (first run); unreadable/malformed is an error naming line and field.
Status loadCache(const std::string& path, std::vector<CacheEntry>* out, std::string* why);
std::string renderCache(const std::vector<CacheEntry>& entries);
// Merges `entries` into the file (replacing same keys) and writes it atomically (temp + rename).
Status saveCache(const std::string& path, const std::vector<CacheEntry>& entries, std::string* why);

}  // namespace icn::tuner
