// The cost table NCCL hands to getCollInfo: a contiguous float[numAlgo][numProto] of modelled microseconds, passed
// as float**. Entries < 0 (-1.0) are unsupported and must never become selectable; NCCL picks the first minimum
// (algorithm-major) among entries in [0, 3.6e9). We force a choice by writing 0.0 into it.
#pragma once
#include <algorithm>

#include "telemetry/coll_names.h"
#include "tuner/store/decision.h"

namespace icn::tuner {

class CostTable {
 public:
  static constexpr float kIgnoreAbove = 3.6e9f;
  // numAlgo/numProto are NCCL's; we only ever touch the first min(numAlgo,7) x min(numProto,3) entries.
  // Inline: getCollInfo builds one and forces a choice on every collective of every rank.
  CostTable(float* data, int numAlgo, int numProto)
      : data_(data),
        nAlgo_(data ? std::clamp(numAlgo, 0, coll::kNumAlgos) : 0),
        nProto_(data ? std::clamp(numProto, 0, coll::kNumProtos) : 0),
        stride_(numProto > 0 ? numProto : 0) {}
  bool supported(int algo, int proto) const {
    if (algo < 0 || algo >= nAlgo_ || proto < 0 || proto >= nProto_) return false;
    float v = *cell(algo, proto);
    return v >= 0.f && v < kIgnoreAbove;
  }
  float at(int algo, int proto) const { return supported(algo, proto) ? *cell(algo, proto) : -1.f; }
  int algos() const { return nAlgo_; }
  int protos() const { return nProto_; }
  // NCCL's own pick from the table as it is now (algo-major first minimum); {-1,-1} when nothing is supported.
  Decision ncclChoice() const;
  // Applies d (algo and/or proto); false (table untouched) when the requested pair is unsupported.
  bool force(const Decision& d);

 private:
  float* cell(int a, int p) const { return data_ + a * stride_ + p; }
  float* data_;
  int nAlgo_, nProto_, stride_;
};

}  // namespace icn::tuner
