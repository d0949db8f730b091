// icn-heatmap's model of a snapshot file (the JSON the plugin writes), decoupled from the JSON reader.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace icn::heatmapview {

struct Peer {
  int peerRank = -1;
  std::string peer;
  int channel = 0;
  double sendBytes = 0, sendMsgs = 0, recvBytes = 0, recvMsgs = 0;
};

struct Coll {
  std::string coll, algo, proto;
  int bucket = 0, channels = 0;
  double count = 0, meanUs = 0, minUs = 0, p50Us = 0;
};

struct Comm {
  std::string commId;
  int rank = -1, nranks = 0;
  std::vector<Peer> peers;
  std::vector<Coll> colls;
};

struct Snapshot {
  std::string host;
  int pid = 0;
  double timeMs = 0;
  std::vector<Comm> comms;
};

bool load(const std::string& path, Snapshot* out, std::string* why);
std::string renderSvg(const Snapshot& s);

}  // namespace icn::heatmapview
