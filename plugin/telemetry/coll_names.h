// Collective / algorithm / protocol numbering shared by telemetry, tuner and tools. The numbers equal NCCL's so
// adapters pass them through, but nothing here includes an NCCL header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace icn::coll {

constexpr int kNumColls = 5;   // Broadcast, Reduce, AllGather, ReduceScatter, AllReduce (what the tuner sees)
constexpr int kNumAlgos = 7;   // TREE RING COLLNET_DIRECT COLLNET_CHAIN NVLS NVLS_TREE PAT
constexpr int kNumProtos = 3;  // LL LL128 SIMPLE
constexpr int kNumBuckets = 48;  // log2(bytes) buckets: 0 (<= 1 B) .. 47 (128 TiB)
constexpr int kAllReduce = 4, kAllGather = 2, kReduceScatter = 3;
constexpr int kTree = 0, kRing = 1;
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;

const char* collName(int c);   // "AllReduce"; "?" when out of range
const char* algoName(int a);   // "RING"
const char* protoName(int p);  // "LL128"
// Case-insensitive; accept NCCL's spellings ("AllReduce", "allreduce", "RING", "ring", "SIMPLE", "simple").
int parseColl(std::string_view s);   // -1 when unknown
int parseAlgo(std::string_view s);   // -1 when unknown
int parseProto(std::string_view s);  // -1 when unknown
// Element size of NCCL's datatype names ("ncclFloat32" -> 4); 0 when unknown.
int datatypeSize(std::string_view s);

// floor(log2(bytes)), clamped to the bucket table.
inline int bucketOf(uint64_t bytes) {
  if (bytes <= 1) return 0;
  int b = 63 - __builtin_clzll(bytes);
  return b < kNumBuckets ? b : kNumBuckets - 1;
}

}  // namespace icn::coll
