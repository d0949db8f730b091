// Kept apart: <linux/tcp.h> (whose struct tcp_info has the newer fields) and glibc's <netinet/tcp.h> do not mix.
#include "transport/tcp/tcp_info.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace icn::tcp {

bool bytesAcked(int fd, uint64_t* out) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked) return false;
  *out = info.tcpi_bytes_acked;
  return true;
}

bool tcpBusy(int fd, TcpBusy* out) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (len < offsetof(tcp_info, tcpi_sndbuf_limited) + sizeof info.tcpi_sndbuf_limited) return false;
  out->bytesAcked = info.tcpi_bytes_acked;
  // The kernel's busy time already holds the times limited by the peer's window and by the send buffer (it is the
  // sum of its three chronographs); those two are given apart as well.
  out->busyUs = info.tcpi_busy_time;
  out->netUs = info.tcpi_busy_time >= info.tcpi_rwnd_limited ? info.tcpi_busy_time - info.tcpi_rwnd_limited : 0;
  return true;
}

}  // namespace icn::tcp
