#include "tuner/store/cost_table.h"

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
  if (d.algo >= 0 && d.proto >= 0) {  // the usual case: no search
    if (supported(d.algo, d.proto)) {
      ba = d.algo;
      bp = d.proto;
    }
  } else {
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
  }
  if (ba < 0) return false;
  // Another entry already at 0.0 would tie, and NCCL keeps the first minimum (algorithm-major): lift those that come
  // before ours just above it. Only they can win, so only they are looked at (a few cells: this runs every call).
  for (int a = 0; a <= ba; ++a) {
    float* row = cell(a, 0);
    const int end = a == ba ? bp : nProto_;
    for (int p = 0; p < end; ++p)
      if (row[p] == 0.f) row[p] = 1.f;
  }
  *cell(ba, bp) = 0.f;
  return true;
}

}  // namespace icn::tuner
