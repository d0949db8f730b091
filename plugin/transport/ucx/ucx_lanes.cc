#include "transport/ucx/ucx_lanes.h"

#include <stdio.h>
#include <stdlib.h>

#include <mutex>
#include <set>
#include <sstream>

#include "core/log.h"

namespace icn::ucx {

namespace {
std::string epInfo(ucp_ep_h ep) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (!f) return {};
  ucx().ep_print_info(ep, f);
  fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}
}  // namespace

size_t rendezvousFrom(ucp_ep_h ep) {
  std::istringstream in(epInfo(ep));
  std::string line;
  // "#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)"
  while (std::getline(in, line)) {
    size_t at = line.find(" tag_send: ");
    if (at == std::string::npos) continue;
    size_t r = line.find("..<rndv>", at);
    if (r == std::string::npos) return SIZE_MAX;
    size_t start = line.rfind("..", r - 1);
    if (start == std::string::npos || start < at) return SIZE_MAX;
    return strtoull(line.c_str() + start + 2, nullptr, 10);
  }
  return SIZE_MAX;
}

std::string describeLanes(ucp_ep_h ep) {
  std::set<std::string> lanes;
  std::istringstream in(epInfo(ep));
  std::string line;
  // Lane lines look like "#   lane[0]:  2:posix/memory.0 md1 ..."; keep "posix/memory".
  while (std::getline(in, line)) {
    if (line.find("lane[") == std::string::npos) continue;
    size_t colon = line.find(':', line.find("lane["));
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::string w;
    while (words >> w) {
      size_t slash = w.find('/');
      if (slash == std::string::npos) continue;
      size_t c = w.find(':');
      std::string tl = c != std::string::npos && c < slash ? w.substr(c + 1) : w;
      size_t dot = tl.rfind('.');
      if (dot != std::string::npos && dot > tl.find('/')) tl = tl.substr(0, dot);
      lanes.insert(tl);
      break;
    }
  }
  std::string out;
  for (const auto& l : lanes) out += (out.empty() ? "" : ", ") + l;
  return out;
}

void logLanesOnce(ucp_ep_h ep, const std::string& peer) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::string lanes = describeLanes(ep);
  std::lock_guard lk(mu);
  if (!seen.insert(lanes).second) return;
  ICN_INFO(subsys::Net | subsys::Init, "UCX endpoint to %s uses %s (UCX's choice; set UCX_TLS to restrict)",
           peer.c_str(), lanes.empty() ? "unknown lanes" : lanes.c_str());
}

}  // namespace icn::ucx
