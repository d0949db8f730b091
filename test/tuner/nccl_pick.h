// Test helper: NCCL 2.28's choice from a cost table (first minimum, algorithm-major, among entries in [0, 3.6e9)).
#pragma once
#include <utility>

inline std::pair<int, int> ncclPick(const float* t, int numAlgo = 7, int numProto = 3) {
  float best = 3.6e9f;
  std::pair<int, int> pick{-1, -1};
  for (int a = 0; a < numAlgo; ++a)
    for (int p = 0; p < numProto; ++p) {
      float v = t[a * numProto + p];
      if (v == -1.0f) continue;
      if (v >= 0.0f && v < best) {
        best = v;
        pick = {a, p};
      }
    }
  return pick;
}

// A table shaped like NCCL's for 2 GPUs on one node: Tree/Ring x LL/LL128/Simple supported, the rest -1.
inline void realisticTable(float* t, double bytes) {
  for (int i = 0; i < 21; ++i) t[i] = -1.f;
  const float lat[2][3] = {{6.8f, 8.9f, 14.0f}, {6.6f, 8.3f, 13.5f}};
  const float bw[2][3] = {{9.f, 60.f, 80.f}, {18.f, 110.f, 140.f}};  // GB/s
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 3; ++p) t[a * 3 + p] = lat[a][p] + static_cast<float>(bytes / (bw[a][p] * 1e3));
}
