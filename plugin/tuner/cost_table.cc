#include "tuner/cost_table.h"

#include <algorithm>
#include <cstdio>

#include "telemetry/coll_names.h"

namespace icn::tuner {

const char* describe(const Decision& d, char* buf, unsigned long size) {
  if (!d.valid()) {
    snprintf(buf, size, "default");
  } else if (d.channels > 0) {
    snprintf(buf, size, "%s/%s/ch%d", d.algo >= 0 ? coll::algoName(d.algo) : "*",
             d.proto >= 0 ? coll::protoName(d.proto) : "*", d.channels);
  } else {
    snprintf(buf, size, "%s/%s", d.algo >= 0 ? coll::algoName(d.algo) : "*",
             d.proto >= 0 ? coll::protoName(d.proto) : "*");
  }
  return buf;
}

CostTable::CostTable(float* data, int numAlgo, int numProto)
    : data_(data),
      nAlgo_(data ? std::clamp(numAlgo, 0, coll::kNumAlgos) : 0),
      nProto_(data ? std::clamp(numProto, 0, coll::kNumProtos) : 0),
      stride_(numProto > 0 ? numProto : 0) {}

bool CostTable::supported(int a, int p) const {
  if (a < 0 || a >= nAlgo_ || p < 0 || p >= nProto_) return false;
  float v = *cell(a, p);
  return v >= 0.f && v < kIgnoreAbove;
}

float CostTable::at(int a, int p) const { return supported(a, p) ? *cell(a, p) : -1.f; }

Decision CostTable::ncclChoice() const {
  Decision best;
  float bestV = kIgnoreAbove;
  for (int a = 0; a < nAlgo_; ++a)
    for (int p = 0; p < nProto_; ++p)
      if (supported(a, p) && *cell(a, p) < bestV) {
        bestV = *cell(a, p);
        best.algo = static_cast<int8_t>(a);
        best.proto = static_cast<int8_t>(p);
      }
  return best;
}

bool CostTable::force(const Decision& d) {
  if (d.algo < 0 && d.proto < 0) return true;  // channels only: nothing to force in the table
  // Resolve a wildcard to the cheapest supported entry of the fixed dimension.
  int ba = -1, bp = -1;
  float bestV = kIgnoreAbove;
  for (int a = 0; a < nAlgo_; ++a) {
    if (d.algo >= 0 && a != d.algo) continue;
    for (int p = 0; p < nProto_; ++p) {
      if (d.proto >= 0 && p != d.proto) continue;
      if (supported(a, p) && *cell(a, p) < bestV) {
        bestV = *cell(a, p);
        ba = a;
        bp = p;
      }
    }
  }
  if (ba < 0) return false;
  // Another supported entry already at 0.0 would tie and win if it comes first: lift it just above ours.
  for (int a = 0; a < nAlgo_; ++a)
    for (int p = 0; p < nProto_; ++p)
      if ((a != ba || p != bp) && supported(a, p) && *cell(a, p) == 0.f) *cell(a, p) = 1.f;
  *cell(ba, bp) = 0.f;
  return true;
}

}  // namespace icn::tuner
