// RAII sockets and addresses for the out-of-band handshake. All sockets are non-blocking.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/status.h"

namespace icn {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  std::string str() const;  // "1.2.3.4:port" or "[fe80::1%eth0]:port"
};

// Picks the interface/address for the handshake per ICN_SOCKET_IFNAME / NCCL_SOCKET_IFNAME.
Status pickInterface(SockAddr* addr, std::string* ifname);

// One interface a transport may spread its traffic over: its name, address (port 0) and subnet prefix length.
struct Rail {
  std::string ifname;
  SockAddr addr;
  int prefixLen = 0;
};
// The interfaces that ICN_SOCKET_IFNAME / NCCL_SOCKET_IFNAME select (without either: every non-loopback one but
// docker*, virbr*), one address each, in the family of the handshake's interface, which comes first; at most `max`.
// Empty when no interface is up.
std::vector<Rail> pickRails(size_t max);
// Whether `a` and `b` share their first prefixLen bits (same family required).
bool sameSubnet(const SockAddr& a, const SockAddr& b, int prefixLen);
// With the port of `b`, whether both name the same IP address.
bool sameHost(const SockAddr& a, const SockAddr& b);

// Binds (port 0) and listens; non-blocking. *bound gets the actual address.
Status listenOn(const SockAddr& addr, Fd* out, SockAddr* bound);
// Starts a non-blocking connect; completion is seen as writability (see socketConnected()). With `source`, the
// socket is bound to that address (port 0) first, so the connection leaves through its interface. A failure is
// logged at `failLevel` (Info for a probe that is expected to fail while a link is down).
Status startConnect(const SockAddr& addr, Fd* out, const SockAddr* source = nullptr,
                    LogLevel failLevel = LogLevel::Warn);
// Ok with *connected=false while in progress; error (logged at `failLevel`) when the connect failed.
Status socketConnected(int fd, bool* connected, const std::string& peer, LogLevel failLevel = LogLevel::Warn);
// Keepalive / TCP_USER_TIMEOUT so a dead link surfaces within ICN_PEER_TIMEOUT_MS, and the retransmission backoff
// capped (ICN_TCP_RTO_MAX_MS) so a link that returns before it carries data again at once.
void setLivenessOptions(int fd);

}  // namespace icn
