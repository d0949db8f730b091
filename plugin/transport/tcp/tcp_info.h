// What the kernel knows of a TCP socket's delivery, for measuring a lane's rate by what its peer acknowledged
// rather than by what the socket buffer took.
#pragma once
#include <cstdint>

namespace icn::tcp {

// Bytes of the socket's stream the peer has acknowledged (TCP_INFO tcpi_bytes_acked); false when the kernel does
// not say (before Linux 4.1, or not a TCP socket).
bool bytesAcked(int fd, uint64_t* out);

// Bytes the peer acknowledged, and the time the socket had data to send or waiting for its acknowledgement (busy,
// or limited by the peer's window or the send buffer), microseconds. Their rise between two looks is the link's pace
// while the socket had work: idle time, and the time until the application looked, are not in it. The kernel counts
// busy time in jiffies (1-10 ms): a span shorter than that counts a jiffy or nothing, which averages out over the
// 100 ms of busy time a rate sample takes. False when the kernel does not tell (before Linux 4.10).
// netUs leaves out the time the peer's window was full: the time the link itself set the pace.
struct TcpBusy {
  uint64_t bytesAcked = 0;
  uint64_t busyUs = 0;
  uint64_t netUs = 0;
};
bool tcpBusy(int fd, TcpBusy* out);

}  // namespace icn::tcp
