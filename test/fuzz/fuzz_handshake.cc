// libFuzzer harness for everything that parses bytes from the network or from NCCL's handle:
//  - decodeFrameHeader / decodeHello on the raw input (with a re-encode round-trip check),
//  - readListenHandle on the input padded to a 128-byte handle,
//  - the acceptor's Handshake state machine fed the input as a byte stream (split into frames, EOF at the
//    end): it must end in Done or a refusal within a bounded number of steps, never crash or spin.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/handshake.h"
#include "core/log.h"
#include "core/oob.h"

namespace {

void quietSink(int, unsigned long, const char*, int, const char*, ...) {}

void checkRoundTrip(const icn::Hello& h) {
  icn::Hello again;
  std::string why;
  auto bytes = icn::encodeHello(h);
  if (icn::decodeHello(bytes, &again, &why) != icn::Status::Ok || again.host != h.host || again.blob != h.blob ||
      again.mac != h.mac || again.commId != h.commId || again.rank != h.rank || again.pid != h.pid ||
      memcmp(again.nonce, h.nonce, 16) != 0)
    abort();  // decode(encode(decode(x))) must be stable
}

void driveAcceptor(const uint8_t* data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return;
  // The input plays the connector; a socketpair holds a few hundred KiB, the frame limit is 64 KiB.
  size_t off = 0;
  while (off < size) {
    ssize_t n = send(sv[1], data + off, size - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(sv[1], SHUT_WR);
  icn::Handshake hs(icn::Fd(sv[0]), icn::Handshake::Role::Acceptor, "fuzz", icn::makeLocalHello(1, 1, {}));
  bool confirmed = false;
  for (int step = 0; step < 64; step++) {
    icn::Handshake::Phase phase;
    if (hs.progress(&phase) != icn::Status::Ok || phase == icn::Handshake::Phase::Done) break;
    if (phase == icn::Handshake::Phase::PeerKnown && !confirmed) {
      hs.confirm({1, 2, 3});
      confirmed = true;
    }
  }
  close(sv[1]);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::setLogSink(&quietSink);  // refusals are expected by the thousand
  setenv("ICN_CONNECT_TIMEOUT_MS", "1000", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string why;
  if (size >= 12) {
    icn::FrameType type;
    uint32_t len = 0;
    if (icn::decodeFrameHeader(std::span<const uint8_t, 12>(data, 12), &type, &len, &why) == icn::Status::Ok &&
        len > icn::kMaxFramePayload)
      abort();
  }
  icn::Hello h;
  if (icn::decodeHello({data, size}, &h, &why) == icn::Status::Ok) checkRoundTrip(h);
  if (size > 12) {  // payload of a would-be frame
    icn::Hello h2;
    if (icn::decodeHello({data + 12, size - 12}, &h2, &why) == icn::Status::Ok) checkRoundTrip(h2);
  }
  std::array<uint8_t, icn::kHandleSize> handle{};
  memcpy(handle.data(), data, std::min(size, handle.size()));
  icn::SockAddr addr;
  if (icn::readListenHandle(handle, icn::kTransportUcx, &addr, &why) == icn::Status::Ok &&
      addr.family() != AF_INET && addr.family() != AF_INET6)
    abort();
  driveAcceptor(data, size);
  return 0;
}
