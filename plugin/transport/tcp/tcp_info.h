// What the kernel knows of a TCP socket's delivery, for measuring a lane's rate by what its peer acknowledged
// rather than by what the socket buffer took.
#pragma once
#include <cstdint>

namespace icn::tcp {

// Bytes of the socket's stream the peer has acknowledged (TCP_INFO tcpi_bytes_acked); false when the kernel does
// not say (before Linux 4.1, or not a TCP socket).
bool bytesAcked(int fd, uint64_t* out);

}  // namespace icn::tcp
