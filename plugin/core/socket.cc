#include "core/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <poll.h>
#include <algorithm>
#include <atomic>
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
  int prefixLen = 0;
};

int prefixLength(const sockaddr* mask) {
  if (!mask) return 0;
  const uint8_t* b = nullptr;
  size_t n = 0;
  if (mask->sa_family == AF_INET) {
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  int bits = 0;
  for (size_t i = 0; i < n; i++) bits += __builtin_popcount(b[i]);
  return bits;
}

// The IP address bytes of an AF_INET/AF_INET6 address, and their count (0 for another family).
size_t ipBytes(const SockAddr& a, const uint8_t** out) {
  if (a.family() == AF_INET) {
    *out = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr);
    return 4;
  }
  if (a.family() == AF_INET6) {
    *out = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
    return 16;
  }
  return 0;
}

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
    c.prefixLen = prefixLength(i->ifa_netmask);
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

std::vector<Rail> pickRails(size_t max) {
  std::vector<Rail> out;
  SockAddr primary;
  std::string primaryName;
  if (max == 0 || pickInterface(&primary, &primaryName) != Status::Ok) return out;
  const auto cands = listInterfaces();
  for (auto& c : cands)
    if (c.name == primaryName && sameHost(c.addr, primary)) out.push_back({c.name, c.addr, c.prefixLen});
  if (out.empty()) return out;
  std::string spec = params::getString(params::Id::SocketIfname);
  if (spec.empty())
    if (const char* nccl = getenv("NCCL_SOCKET_IFNAME"); nccl && *nccl) spec = nccl;
  const IfaceFilter filter(spec.empty() ? "^docker,virbr" : spec);
  for (auto& c : cands) {
    if (out.size() >= max) break;
    if (c.loopback || c.addr.family() != primary.family() || !filter.matches(c.name)) continue;
    if (c.addr.family() == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(&c.addr.storage)->sin6_addr))
      continue;  // a link-local address needs its scope on the other host too: not a rail
    bool known = false;
    for (auto& r : out) known = known || r.ifname == c.name;
    if (!known) out.push_back({c.name, c.addr, c.prefixLen});
  }
  return out;
}

bool sameSubnet(const SockAddr& a, const SockAddr& b, int prefixLen) {
  const uint8_t *x = nullptr, *y = nullptr;
  const size_t n = ipBytes(a, &x);
  if (n == 0 || a.family() != b.family() || ipBytes(b, &y) != n) return false;
  if (prefixLen <= 0 || static_cast<size_t>(prefixLen) > n * 8) return false;  // no subnet: nothing is on-link
  const size_t whole = static_cast<size_t>(prefixLen) / 8;
  if (memcmp(x, y, whole) != 0) return false;
  const int rest = prefixLen % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (x[whole] & mask) == (y[whole] & mask);
}

bool sameHost(const SockAddr& a, const SockAddr& b) {
  const uint8_t *x = nullptr, *y = nullptr;
  const size_t n = ipBytes(a, &x);
  return n != 0 && a.family() == b.family() && ipBytes(b, &y) == n && memcmp(x, y, n) == 0;
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

Status startConnect(const SockAddr& addr, Fd* out, const SockAddr* source, LogLevel failLevel) {
  Fd fd;
  ICN_CHECK(makeSocket(addr.family(), &fd));
  if (source) {
    SockAddr local = *source;
    if (local.family() == AF_INET) reinterpret_cast<sockaddr_in*>(&local.storage)->sin_port = 0;
    if (local.family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&local.storage)->sin6_port = 0;
    if (::bind(fd.get(), local.sa(), local.len) != 0) {
      logf(failLevel, subsys::Net, __FILE__, __LINE__, "connect to %s from %s: bind: %s", addr.str().c_str(),
           local.str().c_str(), strerror(errno));
      return Status::SystemError;
    }
  }
  if (::connect(fd.get(), addr.sa(), addr.len) != 0 && errno != EINPROGRESS) {
    logf(failLevel, subsys::Net, __FILE__, __LINE__, "connect to %s: %s", addr.str().c_str(), strerror(errno));
    return Status::RemoteError;
  }
  *out = std::move(fd);
  return Status::Ok;
}

Status socketConnected(int fd, bool* connected, const std::string& peer, LogLevel failLevel) {
  pollfd p{fd, POLLOUT, 0};
  *connected = false;
  int r = ::poll(&p, 1, 0);
  if (r == 0) return Status::Ok;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    logf(failLevel, subsys::Net, __FILE__, __LINE__, "connect to %s failed: %s", peer.c_str(), strerror(err));
    return Status::RemoteError;
  }
  *connected = (p.revents & POLLOUT) != 0;
  return Status::Ok;
}

// TCP_RTO_MAX_MS from Linux 6.15's uapi, absent from older libc headers.
constexpr int kTcpRtoMaxMs = 44;
constexpr int kKernelRtoMaxFloorMs = 1000;

// Caps TCP's retransmission backoff (ICN_TCP_RTO_MAX_MS): under the kernel's doubling, a link back after an outage
// carries data only at the next retransmission, up to as long again as the outage lasted, and an outage that
// outlasts the last retransmission before the user timeout ends the connection though the link came back before
// the timeout. Logged once per process.
static void capRetransmissionTimeout(int fd) {
  const int want = static_cast<int>(params::getInt(params::Id::TcpRtoMaxMs));
  if (want == 0) return;
  const int ms = std::max(want, kKernelRtoMaxFloorMs);
  const bool capped = setsockopt(fd, IPPROTO_TCP, kTcpRtoMaxMs, &ms, sizeof ms) == 0;
  const int err = errno;
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  if (capped)
    ICN_INFO(subsys::Net, "sockets: TCP retransmission timeout capped at %d ms (ICN_TCP_RTO_MAX_MS): data moves "
             "again within that of a link's return", ms);
  else
    ICN_INFO(subsys::Net, "sockets: this kernel does not cap TCP's retransmission timeout (TCP_RTO_MAX_MS, Linux "
             "6.15+: %s): after a link outage data resumes at TCP's next doubled retransmission, and an outage that "
             "outlasts the last one before ICN_PEER_TIMEOUT_MS ends the connection", strerror(err));
}

void setLivenessOptions(int fd) {
  int timeoutMs = static_cast<int>(params::getInt(params::Id::PeerTimeoutMs));
  int one = 1;
  // Probes a tenth of the timeout apart: with TCP_USER_TIMEOUT set, an idle socket is given up at the first probe
  // that finds nothing received for the timeout, and a link back in time must get an answer to one probe before.
  int idle = std::max(1, timeoutMs / 10000), intvl = idle, cnt = 3;
  unsigned int user = static_cast<unsigned int>(timeoutMs);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user);
  capRetransmissionTimeout(fd);
}

}  // namespace icn
