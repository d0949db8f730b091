#include "transport/tcp/tcp_paths.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

namespace icn::tcp {

// The two addresses without their ports (a path is the two links, not one socket).
std::string PathHealth::keyOf(const SockAddr& local, const SockAddr& peer) {
  auto host = [](const SockAddr& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.family() == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, buf, sizeof buf);
    else if (a.family() == AF_INET6)
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, buf, sizeof buf);
    return std::string(buf);
  };
  auto isIp = [](const SockAddr& a) { return a.family() == AF_INET || a.family() == AF_INET6; };
  if (!isIp(local) || !isIp(peer)) return {};
  return host(local) + ">" + host(peer);
}

void PathHealth::failed(const SockAddr& local, const SockAddr& peer, int64_t nowNs) {
  const std::string key = keyOf(local, peer);
  if (key.empty()) return;
  std::lock_guard lk(mu_);
  if (failedAt_.size() >= kMaxPaths && !failedAt_.count(key)) {
    auto oldest = std::min_element(failedAt_.begin(), failedAt_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    failedAt_.erase(oldest);
  }
  failedAt_[key] = nowNs;
  generation_.fetch_add(1, std::memory_order_release);
}

int64_t PathHealth::failedAt(const SockAddr& local, const SockAddr& peer) const {
  const std::string key = keyOf(local, peer);
  if (key.empty()) return 0;
  std::lock_guard lk(mu_);
  auto it = failedAt_.find(key);
  return it == failedAt_.end() ? 0 : it->second;
}

PathVerdict judgeLaneOnPath(int64_t failedAtNs, int64_t sinceNs, int64_t lastAckNs, bool waiting, int64_t nowNs) {
  if (failedAtNs == 0 || failedAtNs <= sinceNs || lastAckNs > failedAtNs) return PathVerdict::Keep;
  if (waiting && nowNs - lastAckNs < kPathQuietNs) return PathVerdict::LookAgain;
  return PathVerdict::GiveUp;
}

PathHealth& paths() {
  static PathHealth* registry = new PathHealth();  // never destroyed: comms may close during exit
  return *registry;
}

}  // namespace icn::tcp
