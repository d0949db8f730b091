// libFuzzer harness for the JSON readers of recorded inputs: the JSON parser itself and the heatmap
// documents (tuner/telemetry snapshots read by `icn-topo graph`).
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "core/log.h"
#include "topo/graph.h"
#include "core/json.h"

namespace {
void quietSink(int, unsigned long, const char*, int, const char*, ...) {}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::setLogSink(&quietSink);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  icn::json::Value v;
  std::string err;
  if (!icn::json::parse(text, v, err) && err.empty()) abort();
  std::map<std::string, icn::topo::CommTraffic> out;
  err.clear();
  if (icn::topo::mergeHeatmap(text, "fuzz.json", out, err) != icn::Status::Ok && err.empty()) abort();
  return 0;
}
