// `icn-topo graph`: NCCL_GRAPH_FILE from traffic heatmaps. The ring keeps the rank pairs that exchange the
// most bytes adjacent (maximum-weight Hamiltonian cycle: exact for <= 16 ranks, greedy + 2-opt above).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "topo/model.h"

namespace icn::topo {

struct CommTraffic {
  std::string commId;
  int nranks = 0;
  std::vector<double> bytes;  // symmetric nranks x nranks, bytes exchanged in both directions
  std::vector<bool> reported;  // ranks that contributed a file entry
  double total() const;
  double at(int a, int b) const { return bytes[static_cast<size_t>(a) * nranks + b]; }
};

// Reads and merges heatmap files (tuner/telemetry format, version 1) by commId.
Status loadHeatmaps(const std::vector<std::string>& files, std::map<std::string, CommTraffic>& out, std::string& err);
// Parses one heatmap document (exposed for tests).
Status mergeHeatmap(const std::string& text, const std::string& origin, std::map<std::string, CommTraffic>& out,
                    std::string& err);

// Ring order over 0..n-1 maximising the sum of adjacent weights; starts at 0.
std::vector<int> ringOrder(const CommTraffic& t);
double ringWeight(const CommTraffic& t, const std::vector<int>& ring);

struct GraphParams {
  int nchannels = 0;        // 0 = derive
  double speedIntra = 0;    // GB/s per channel; 0 = derive
  double speedInter = 0;
  std::string typeIntra;    // NVL, PIX, PXB, PHB, SYS; empty = derive
  std::string typeInter = "PIX";
  std::vector<int> devs;    // GPU dev (NVML index) of each rank; empty = rank i -> GPU i of the machine
};

// Writes a graphs file with one ring graph (id 0). The machine (may be empty) provides link types and speeds.
Status writeGraphXml(const CommTraffic& t, const std::vector<int>& ring, const Machine& m, GraphParams p,
                     std::string& out, std::string& err);

}  // namespace icn::topo
