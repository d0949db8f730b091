#include "transport/ucx/ucx_lanes.h"

#include <stdio.h>
#include <stdlib.h>

#include <mutex>
#include <set>
#include <sstream>

#include "core/log.h"

namespace icn::ucx {

std::string describeLanes(ucp_ep_h ep) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (!f) return {};
  ucx().ep_print_info(ep, f);
  fclose(f);
  std::set<std::string> lanes;
  std::istringstream in(std::string(buf, len));
  free(buf);
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
