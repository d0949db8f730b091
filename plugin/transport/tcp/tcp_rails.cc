#include "transport/tcp/tcp_rails.h"

#include <netinet/in.h>

#include <cstring>

namespace icn::tcp {

RailAddr toRailAddr(const SockAddr& a) {
  RailAddr r;
  if (a.family() == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
    r.family = 4;
    r.port = ntohs(in->sin_port);
    memcpy(r.addr, &in->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    r.family = 6;
    r.port = ntohs(in6->sin6_port);
    memcpy(r.addr, &in6->sin6_addr, 16);
  }
  return r;
}

SockAddr fromRailAddr(const RailAddr& r) {
  SockAddr a;
  if (r.family == 4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(r.port);
    memcpy(&in->sin_addr, r.addr, 4);
    a.len = sizeof(sockaddr_in);
  } else if (r.family == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(r.port);
    memcpy(&in6->sin6_addr, r.addr, 16);
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

std::vector<RailPath> pairRails(const std::vector<Rail>& local, const SockAddr& handleAddr, const Blob& answer) {
  std::vector<RailPath> paths;
  paths.push_back({local.empty() ? std::string("?") : local[0].ifname, false, {}, handleAddr});
  std::vector<bool> used(local.size(), false);
  if (!used.empty()) used[0] = true;
  for (int i = 0; i < answer.nrails && i < kMaxRails; i++) {
    const SockAddr peer = fromRailAddr(answer.rails[i]);
    if (sameHost(peer, handleAddr)) continue;  // the handshake's path already goes there
    for (size_t k = 0; k < local.size(); k++) {
      if (used[k] || !sameSubnet(local[k].addr, peer, local[k].prefixLen)) continue;
      used[k] = true;
      paths.push_back({local[k].ifname, true, local[k].addr, peer});
      break;
    }
  }
  return paths;
}

std::string describeLanes(const std::vector<std::string>& railNames, const std::vector<int>& laneRail) {
  std::string out;
  for (size_t r = 0; r < railNames.size(); r++) {
    std::string which;
    int n = 0;
    for (size_t l = 0; l < laneRail.size(); l++)
      if (laneRail[l] == static_cast<int>(r)) which += (n++ ? "," : "") + std::to_string(l);
    if (n == 0) continue;
    out += (out.empty() ? "" : ", ") + railNames[r] + (n == 1 ? " (lane " : " (lanes ") + which + ")";
  }
  return out;
}

std::string ipOnly(const SockAddr& a) {
  const std::string s = a.str();
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return s;
  std::string ip = s.substr(0, colon);
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  return ip;
}

}  // namespace icn::tcp
