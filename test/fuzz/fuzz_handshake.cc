// libFuzzer harness for everything that parses bytes from the network or from NCCL's handle:
//  - decodeFrameHeader / decodeHello on the raw input (with a re-encode round-trip check of every field),
//  - readListenHandle on the input padded to a 128-byte handle,
//  - a Handshake state machine fed the rest of the input as the peer's byte stream (EOF at the end): it must end
//    in Done or a refusal within a bounded number of steps, never crash or spin.
// The first input byte picks the role (bit 0: connector, else acceptor) and whether the harness makes the tags
// in the stream valid (bit 1): the local side's nonce and identity are fixed, so with that bit the fuzzer gets
// past the tag checks into the commId check, the transport's PeerKnown/confirm step, CHALLENGE and READY parsing.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/log.h"
#include "core/oob.h"
#include "core/wire.h"

namespace {

void quietSink(int, unsigned long, const char*, int, const char*, ...) {}

void checkRoundTrip(const icn::Hello& h) {
  icn::Hello again;
  std::string why;
  auto bytes = icn::encodeHello(h);
  if (icn::decodeHello(bytes, &again, &why) != icn::Status::Ok || again.host != h.host || again.blob != h.blob ||
      again.mac != h.mac || again.commId != h.commId || again.rank != h.rank || again.pid != h.pid ||
      again.transport != h.transport || memcmp(again.nonce, h.nonce, 16) != 0 ||
      icn::helloDigest(again) != icn::helloDigest(h))
    abort();  // decode(encode(decode(x))) must be stable
  for (char c : again.host)
    if (c < 0x21 || c > 0x7e) abort();  // only printable host names get through
}

// The local side's HELLO, fixed so that valid tags can be computed for it.
icn::Hello fixedLocal(bool connector) {
  icn::Hello h;
  h.transport = 1;
  h.commId = 1;
  h.rank = 0;
  h.pid = 1;
  h.host = "fuzz";
  h.fresh = true;
  if (connector) h.blob = {1, 2, 3};
  return h;
}

std::vector<uint8_t> tagOf(char kind, std::span<const uint8_t> first, std::span<const uint8_t> second) {
  icn::Digest d = icn::auth::tag(icn::proofMessage(kind, first, second));
  return {d.begin(), d.end()};
}

// Rewrites the tags of the HELLO / READY frames in `stream` so they verify against the fixed local side.
std::vector<uint8_t> fixTags(std::span<const uint8_t> stream, bool connector) {
  std::vector<uint8_t> out;
  icn::Hello local = fixedLocal(connector);
  local.blob = {1, 2, 3};  // the connector's own blob, or what the harness confirms the acceptor with
  const icn::Digest dLocal = icn::helloDigest(local);
  icn::Digest dPeer{};
  uint8_t nonceA[16] = {};  // the acceptor's fixed nonce; a connector learns the peer's from its CHALLENGE
  size_t off = 0;
  while (stream.size() - off >= 12) {
    icn::WireReader r(stream.subspan(off, 12));
    uint32_t magic = 0, len = 0;
    uint16_t version = 0, type = 0;
    r.get(&magic), r.get(&version), r.get(&type), r.get(&len);
    if (len > stream.size() - off - 12) break;
    std::vector<uint8_t> payload(stream.begin() + long(off) + 12, stream.begin() + long(off + 12 + len));
    icn::Hello h;
    std::string why;
    if (type == uint16_t(icn::FrameType::Challenge) && connector && len == 16) {
      memcpy(nonceA, payload.data(), 16);
    } else if (type == uint16_t(icn::FrameType::Hello) && icn::decodeHello(payload, &h, &why) == icn::Status::Ok) {
      h.mac.clear();
      dPeer = icn::helloDigest(h);
      h.mac = connector ? tagOf('A', dLocal, dPeer) : tagOf('C', std::span<const uint8_t>(nonceA, 16), dPeer);
      payload = icn::encodeHello(h);
    } else if (type == uint16_t(icn::FrameType::Ready) && !connector) {
      payload = {32};
      auto t = tagOf('R', dPeer, dLocal);
      payload.insert(payload.end(), t.begin(), t.end());
    }
    auto frame = icn::encodeFrame(icn::FrameType(type), payload);
    memcpy(frame.data(), stream.data() + off, 8);  // keep the fuzzer's magic/version/type
    out.insert(out.end(), frame.begin(), frame.end());
    off += 12 + len;
  }
  out.insert(out.end(), stream.begin() + long(off), stream.end());
  return out;
}

void drive(std::span<const uint8_t> stream, bool connector) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return;
  // A socketpair holds a few hundred KiB, the frame limit is 64 KiB.
  size_t off = 0;
  while (off < stream.size()) {
    ssize_t n = send(sv[1], stream.data() + off, stream.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(sv[1], SHUT_WR);
  icn::Handshake hs(icn::Fd(sv[0]), connector ? icn::Handshake::Role::Connector : icn::Handshake::Role::Acceptor,
                    "fuzz", fixedLocal(connector));
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
  if (size == 0) return 0;
  const bool connector = data[0] & 1, fix = data[0] & 2;
  std::span<const uint8_t> stream(data + 1, size - 1);
  if (fix) {
    std::vector<uint8_t> fixed = fixTags(stream, connector);
    drive(fixed, connector);
  } else {
    drive(stream, connector);
  }
  return 0;
}
