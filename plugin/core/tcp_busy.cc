// The kernel's own account of a TCP socket's work: linux/tcp.h has the fields glibc's netinet/tcp.h lacks, and the
// two headers cannot meet in one file.
#include <linux/tcp.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstring>

#include "core/socket.h"

namespace icn {

bool tcpBusy(int fd, TcpBusy* out) {
  struct tcp_info info;
  memset(&info, 0, sizeof info);
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // Kernels before 4.10 return a shorter struct without the busy times.
  if (len < offsetof(struct tcp_info, tcpi_sndbuf_limited) + sizeof info.tcpi_sndbuf_limited) return false;
  out->bytesAcked = info.tcpi_bytes_acked;
  out->busyUs = info.tcpi_busy_time + info.tcpi_rwnd_limited + info.tcpi_sndbuf_limited;
  return true;
}

}  // namespace icn
