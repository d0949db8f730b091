#include "core/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <poll.h>
#include <algorithm>
#include <net/if.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "core/iface_filter.h"
#include "core/log.h"
#include "core/params.h"

namespace icn {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(std::exchange(o.fd_, -1));
  return *this;
}
Fd::~Fd() { reset(); }
void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (family() == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    std::string s = std::string("[") + host;
    char ifn[IF_NAMESIZE];
    if (in6->sin6_scope_id && if_indextoname(in6->sin6_scope_id, ifn)) s += std::string("%") + ifn;
    return s + "]:" + std::to_string(port);
  }
  return "<unknown address family>";
}

namespace {

struct Candidate {
  std::string name;
  SockAddr addr;
  bool loopback;
};

std::vector<Candidate> listInterfaces() {
  std::vector<Candidate> out;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    Candidate c;
    c.name = i->ifa_name;
    c.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    c.addr.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&c.addr.storage, i->ifa_addr, c.addr.len);
    if (fam == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&c.addr.storage);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) in6->sin6_scope_id = if_nametoindex(i->ifa_name);
    }
    out.push_back(std::move(c));
  }
  freeifaddrs(ifs);
  // IPv4 first: it is what users expect to see in logs and what most clusters route.
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.addr.family() < b.addr.family(); });
  return out;
}

}  // namespace

Status pickInterface(SockAddr* addr, std::string* ifname) {
  std::string spec = params::getString(params::Id::SocketIfname);
  const char* origin = "ICN_SOCKET_IFNAME";
  if (spec.empty()) {
    const char* nccl = getenv("NCCL_SOCKET_IFNAME");
    if (nccl && *nccl) {
      spec = nccl;
      origin = "NCCL_SOCKET_IFNAME";
    }
  }
  auto cands = listInterfaces();
  if (!spec.empty()) {
    IfaceFilter filter(spec);
    for (auto& c : cands) {
      if (filter.matches(c.name)) {
        *addr = c.addr;
        *ifname = c.name;
        return Status::Ok;
      }
    }
    ICN_WARN(subsys::Net | subsys::Init, "%s=%s matches no interface that is up with an IP address", origin,
             spec.c_str());
    return Status::InvalidArgument;
  }
  IfaceFilter defaults("^docker,virbr,veth_icn_unused");
  for (auto& c : cands) {
    if (!c.loopback && defaults.matches(c.name)) {
      *addr = c.addr;
      *ifname = c.name;
      return Status::Ok;
    }
  }
  for (auto& c : cands) {
    if (c.loopback) {
      *addr = c.addr;
      *ifname = c.name;
      return Status::Ok;
    }
  }
  ICN_WARN(subsys::Net | subsys::Init, "no network interface is up: cannot open the out-of-band socket");
  return Status::SystemError;
}

static Status makeSocket(int family, Fd* out) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ICN_WARN(subsys::Net, "socket(): %s", strerror(errno));
    return Status::SystemError;
  }
  out->reset(fd);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Status::Ok;
}

Status listenOn(const SockAddr& addr, Fd* out, SockAddr* bound) {
  Fd fd;
  ICN_CHECK(makeSocket(addr.family(), &fd));
  SockAddr local = addr;
  bool any = params::getBool(params::Id::SocketBindAny);
  if (local.family() == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&local.storage);
    in->sin_port = 0;
    if (any) in->sin_addr.s_addr = htonl(INADDR_ANY);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&local.storage);
    in6->sin6_port = 0;
    if (any) in6->sin6_addr = in6addr_any;
  }
  if (::bind(fd.get(), local.sa(), local.len) != 0 || ::listen(fd.get(), 1024) != 0) {
    ICN_WARN(subsys::Net, "cannot listen on %s: %s", local.str().c_str(), strerror(errno));
    return Status::SystemError;
  }
  SockAddr actual;
  actual.len = sizeof actual.storage;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&actual.storage), &actual.len);
  if (any) {  // advertise the interface address, with the port we got
    SockAddr adv = addr;
    if (adv.family() == AF_INET)
      reinterpret_cast<sockaddr_in*>(&adv.storage)->sin_port = reinterpret_cast<sockaddr_in*>(&actual.storage)->sin_port;
    else
      reinterpret_cast<sockaddr_in6*>(&adv.storage)->sin6_port =
          reinterpret_cast<sockaddr_in6*>(&actual.storage)->sin6_port;
    actual = adv;
  }
  *bound = actual;
  *out = std::move(fd);
  return Status::Ok;
}

Status startConnect(const SockAddr& addr, Fd* out) {
  Fd fd;
  ICN_CHECK(makeSocket(addr.family(), &fd));
  if (::connect(fd.get(), addr.sa(), addr.len) != 0 && errno != EINPROGRESS) {
    ICN_WARN(subsys::Net, "connect to %s: %s", addr.str().c_str(), strerror(errno));
    return Status::RemoteError;
  }
  *out = std::move(fd);
  return Status::Ok;
}

Status socketConnected(int fd, bool* connected, const std::string& peer) {
  pollfd p{fd, POLLOUT, 0};
  *connected = false;
  int r = ::poll(&p, 1, 0);
  if (r == 0) return Status::Ok;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    ICN_WARN(subsys::Net, "connect to %s failed: %s", peer.c_str(), strerror(err));
    return Status::RemoteError;
  }
  *connected = (p.revents & POLLOUT) != 0;
  return Status::Ok;
}

void setLivenessOptions(int fd) {
  int timeoutMs = static_cast<int>(params::getInt(params::Id::PeerTimeoutMs));
  int one = 1;
  int idle = std::max(1, timeoutMs / 3000), intvl = std::max(1, timeoutMs / 3000), cnt = 3;
  unsigned int user = static_cast<unsigned int>(timeoutMs);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user);
}

}  // namespace icn
