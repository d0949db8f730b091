#include "telemetry/coll_names.h"

#include <strings.h>

#include <string>

namespace icn::coll {
namespace {
constexpr const char* kColls[kNumColls] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
constexpr const char* kAlgos[kNumAlgos] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr const char* kProtos[kNumProtos] = {"LL", "LL128", "SIMPLE"};

template <size_t N>
int find(const char* const (&names)[N], std::string_view s) {
  for (size_t i = 0; i < N; ++i) {
    std::string_view n(names[i]);
    if (n.size() == s.size() && strncasecmp(n.data(), s.data(), s.size()) == 0) return static_cast<int>(i);
  }
  return -1;
}
}  // namespace

const char* collName(int c) { return c >= 0 && c < kNumColls ? kColls[c] : "?"; }
const char* algoName(int a) { return a >= 0 && a < kNumAlgos ? kAlgos[a] : "?"; }
const char* protoName(int p) { return p >= 0 && p < kNumProtos ? kProtos[p] : "?"; }
int parseColl(std::string_view s) { return find(kColls, s); }
int parseAlgo(std::string_view s) { return find(kAlgos, s); }
int parseProto(std::string_view s) { return find(kProtos, s); }

int datatypeSize(std::string_view s) {
  if (s.substr(0, 4) == "nccl") s.remove_prefix(4);
  struct T { const char* n; int size; };
  static constexpr T kTypes[] = {{"Int8", 1},     {"Uint8", 1},     {"Float8e4m3", 1}, {"Float8e5m2", 1},
                                 {"Float16", 2},  {"Bfloat16", 2},  {"Int32", 4},      {"Uint32", 4},
                                 {"Float32", 4},  {"Int64", 8},     {"Uint64", 8},     {"Float64", 8}};
  for (const T& t : kTypes)
    if (s == t.n) return t.size;
  return 0;
}

}  // namespace icn::coll
