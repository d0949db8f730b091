// Graph XML (NCCL_GRAPH_FILE): <graphs version="1"><graph id="0" pattern="4" ...><channel><gpu dev=.../>...
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "topo/graph.h"
#include "topo/xml_node.h"

namespace icn::topo {
namespace {

constexpr int kPatternRing = 4;  // NCCL_TOPO_PATTERN_RING
constexpr int kMaxChannels = 32;  // MAXCHANNELS/2, what NCCL allows the ring search

// NCCL's per-link NVLink bandwidth model (GB/s) by compute capability.
double nvlinkBw(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return sm == 70 ? 20.0 : 20.0;
  return 18.0;
}

const char* ncclType(PathType p) {
  switch (p) {
    case PathType::X: return "LOC";
    case PathType::NV: return "NVL";
    case PathType::PIX: return "PIX";
    case PathType::PXB: return "PXB";
    case PathType::PHB:
    case PathType::NODE: return "PHB";
    case PathType::SYS: return "SYS";
  }
  return "SYS";
}

std::string devString(int dev) {  // NCCL reads it with strtol(..., 16)
  char b[24];
  snprintf(b, sizeof b, dev == 0 ? "0" : "0x%x", dev);
  return b;
}

std::string num(double v) {
  char b[32];
  snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

Status writeGraphXml(const CommTraffic& t, const std::vector<int>& ring, const Machine& m, GraphParams p,
                     std::string& out, std::string& err) {
  int n = t.nranks;
  if (static_cast<int>(ring.size()) != n || n < 1) {
    err = "ring does not cover the communicator's ranks";
    return Status::InvalidArgument;
  }
  // rank -> index into m.gpus (when the machine is known) and -> NCCL gpu dev.
  std::vector<int> gpuOf(n, -1), dev(n, -1);
  if (!p.devs.empty()) {
    if (static_cast<int>(p.devs.size()) != n) {
      err = "--devs lists " + std::to_string(p.devs.size()) + " devices for " + std::to_string(n) + " ranks";
      return Status::InvalidArgument;
    }
    for (int r = 0; r < n; r++) {
      dev[r] = p.devs[r];
      for (size_t g = 0; g < m.gpus.size(); g++)
        if (m.gpus[g].index == dev[r]) gpuOf[r] = static_cast<int>(g);
    }
  } else {
    for (int r = 0; r < n; r++) {
      dev[r] = r;
      if (r < static_cast<int>(m.gpus.size())) gpuOf[r] = r, dev[r] = m.gpus[r].index;
    }
  }
  std::vector<int> sorted = dev;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() || sorted.front() < 0) {
    err = "each rank needs its own GPU (one GPU per rank in a graph file)";
    return Status::InvalidArgument;
  }

  // Derive type and speed from the ring's weakest edge when the machine describes every rank's GPU.
  bool known = std::all_of(gpuOf.begin(), gpuOf.end(), [](int g) { return g >= 0; });
  PathType worst = PathType::X;
  double edgeBw = 0;
  if (known && n > 1) {
    edgeBw = 1e30;
    for (int i = 0; i < n; i++) {
      int a = gpuOf[ring[i]], b = gpuOf[ring[(i + 1) % n]];
      int nv = 0;
      PathType pt = gpuPath(m, a, b, &nv);
      worst = std::max(worst, pt);
      double bw = pt == PathType::NV ? nv * nvlinkBw(std::min(m.gpus[a].sm, m.gpus[b].sm)) : 24.0;
      edgeBw = std::min(edgeBw, bw);
    }
  }
  if (p.typeIntra.empty()) p.typeIntra = known && n > 1 ? ncclType(worst) : "NVL";
  if (p.nchannels <= 0) p.nchannels = edgeBw > 0 ? std::clamp(static_cast<int>(std::lround(edgeBw / 20.0)), 2, 16) : 2;
  if (p.nchannels > kMaxChannels) {
    err = "at most " + std::to_string(kMaxChannels) + " ring channels";
    return Status::InvalidArgument;
  }
  if (p.speedIntra <= 0) p.speedIntra = edgeBw > 0 ? std::floor(edgeBw / p.nchannels * 10) / 10 : 20.0;
  if (p.speedInter <= 0) p.speedInter = p.speedIntra;
  static const char* kTypes[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"};
  auto validType = [](const std::string& s) {
    return std::any_of(std::begin(kTypes), std::end(kTypes), [&](const char* k) { return s == k; });
  };
  if (!validType(p.typeIntra) || !validType(p.typeInter)) {
    err = "link types must be one of LOC NVL NVB PIX PXB P2C PXN PHB SYS";
    return Status::InvalidArgument;
  }

  XmlNode root{"graphs", {}, {}};
  root.attr("version", "1");
  XmlNode& g = root.add("graph");
  g.attr("id", "0");
  g.attr("pattern", std::to_string(kPatternRing));
  g.attr("crossnic", "0");
  g.attr("nchannels", std::to_string(p.nchannels));
  g.attr("speedintra", num(p.speedIntra));
  g.attr("speedinter", num(p.speedInter));
  g.attr("latencyinter", "0");
  g.attr("typeintra", p.typeIntra);
  g.attr("typeinter", p.typeInter);
  g.attr("samechannels", "0");
  for (int c = 0; c < p.nchannels; c++) {
    XmlNode& ch = g.add("channel");
    // Alternate the direction so both directions of every heavy pair's link carry rings.
    for (int i = 0; i < n; i++) {
      int r = c % 2 == 0 ? ring[i] : ring[(n - i) % n];
      ch.add("gpu").attr("dev", devString(dev[r]));
    }
  }
  out = root.serialize();
  return Status::Ok;
}

}  // namespace icn::topo
