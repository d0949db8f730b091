// Rules file in the CSV format of NCCL's example tuner:
//   coll,minBytes,maxBytes,algo,proto,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
// -1 means "any" (for algo/proto/channels: "keep NCCL's"). '#' starts a comment line; blank lines are skipped.
// Byte ranges are inclusive; the first matching rule wins.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "telemetry/coll_names.h"
#include "tuner/store/decision.h"

namespace icn::tuner {

struct Rule {
  int coll = -1;  // icn::coll numbering, -1 = any
  uint64_t minBytes = 0, maxBytes = UINT64_MAX;
  Decision decision;
  int nNodes = -1, nRanks = -1, numPipeOps = -1, regBuff = -1;
  int line = 0;
};

// Parses the whole text. On error: InvalidArgument and *why = "<source>:<line>: field <n> (<name>): <problem>".
Status parseRules(std::string_view text, const std::string& source, std::vector<Rule>* out, std::string* why);
Status loadRulesFile(const std::string& path, std::vector<Rule>* out, std::string* why);

// Rules compiled for one communicator (nRanks/nNodes fixed): per (coll, size bucket) the few rules whose byte range
// touches the bucket, so a lookup scans a short bounded list instead of the file.
class RuleTable {
 public:
  static constexpr int kPerBucket = 8;
  void build(const std::vector<Rule>& rules, int nRanks, int nNodes);
  const Rule* match(int coll, uint64_t nBytes, int numPipeOps, int regBuff) const;
  bool empty() const { return rules_.empty(); }
  size_t size() const { return rules_.size(); }
  int truncatedBuckets() const { return truncated_; }

 private:
  std::vector<Rule> rules_;
  struct Slot {
    uint8_t n = 0;
    std::array<uint16_t, kPerBucket> idx{};
  };
  std::array<std::array<Slot, coll::kNumBuckets>, coll::kNumColls> slots_{};
  int truncated_ = 0;
};

}  // namespace icn::tuner
