// Wire encoding of handshake frames. Kept apart from the state machine so the fuzzer can drive it alone.
#include <cstdio>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/wire.h"

namespace icn {

std::vector<uint8_t> encodeFrame(FrameType type, std::span<const uint8_t> payload) {
  WireWriter w;
  w.put<uint32_t>(kWireMagic);
  w.put<uint16_t>(kWireVersion);
  w.put<uint16_t>(static_cast<uint16_t>(type));
  w.put<uint32_t>(static_cast<uint32_t>(payload.size()));
  w.bytes(payload);
  return std::move(w.buffer());
}

Status decodeFrameHeader(std::span<const uint8_t, 12> header, FrameType* type, uint32_t* length, std::string* why) {
  WireReader r(header);
  uint32_t magic = 0, len = 0;
  uint16_t version = 0, t = 0;
  r.get(&magic);
  r.get(&version);
  r.get(&t);
  r.get(&len);
  char msg[160];
  if (magic != kWireMagic) {
    snprintf(msg, sizeof msg, "bad magic 0x%08x (not an ICN peer, or a different protocol)", magic);
  } else if (version != kWireVersion) {
    snprintf(msg, sizeof msg, "protocol version %u, we speak %u (mixed ICN versions in one job?)", version, kWireVersion);
  } else if (t != static_cast<uint16_t>(FrameType::Hello) && t != static_cast<uint16_t>(FrameType::Ready) &&
             t != static_cast<uint16_t>(FrameType::Challenge)) {
    snprintf(msg, sizeof msg, "unknown frame type %u", t);
  } else if (len > kMaxFramePayload) {
    snprintf(msg, sizeof msg, "frame of %u bytes exceeds the %zu-byte limit", len, kMaxFramePayload);
  } else {
    *type = static_cast<FrameType>(t);
    *length = len;
    return Status::Ok;
  }
  *why = msg;
  return Status::RemoteError;
}

std::vector<uint8_t> encodeHello(const Hello& h) {
  WireWriter w;
  w.put<uint8_t>(h.transport);
  w.put<uint8_t>(0);
  w.put<uint16_t>(0);
  w.put<uint64_t>(h.commId);
  w.put<uint32_t>(static_cast<uint32_t>(h.rank));
  w.put<uint32_t>(h.pid);
  w.bytes(h.nonce);
  w.put<uint16_t>(static_cast<uint16_t>(h.host.size()));
  w.bytes({reinterpret_cast<const uint8_t*>(h.host.data()), h.host.size()});
  w.put<uint16_t>(static_cast<uint16_t>(h.mac.size()));
  w.bytes(h.mac);
  w.put<uint32_t>(static_cast<uint32_t>(h.blob.size()));
  w.bytes(h.blob);
  return std::move(w.buffer());
}

Status decodeHello(std::span<const uint8_t> payload, Hello* out, std::string* why) {
  WireReader r(payload);
  uint8_t pad8;
  uint16_t pad16, hostLen, macLen;
  uint32_t rank, blobLen;
  std::span<const uint8_t> nonce, host, mac, blob;
  if (!r.get(&out->transport) || !r.get(&pad8) || !r.get(&pad16) || !r.get(&out->commId) || !r.get(&rank) ||
      !r.get(&out->pid) || !r.bytes(16, &nonce)) {
    *why = "truncated HELLO header";
    return Status::RemoteError;
  }
  out->rank = static_cast<int32_t>(rank);
  memcpy(out->nonce, nonce.data(), 16);
  if (!r.get(&hostLen) || hostLen > 255 || !r.bytes(hostLen, &host)) {
    *why = "bad host name field in HELLO";
    return Status::RemoteError;
  }
  for (uint8_t c : host) {  // it reaches our logs: printable ASCII only, no escape sequences or line breaks
    if (c < 0x21 || c > 0x7e) {
      char msg[64];
      snprintf(msg, sizeof msg, "host name in HELLO has a non-printable byte 0x%02x", c);
      *why = msg;
      return Status::RemoteError;
    }
  }
  if (!r.get(&macLen) || (macLen != 0 && macLen != 32) || !r.bytes(macLen, &mac)) {
    *why = "bad authentication field in HELLO";
    return Status::RemoteError;
  }
  if (!r.get(&blobLen) || !r.bytes(blobLen, &blob) || !r.atEnd()) {
    *why = "HELLO transport payload length does not match the frame";
    return Status::RemoteError;
  }
  if (out->transport < 1 || out->transport > 3) {  // ucx, ib, tcp (core/oob.h)
    *why = "unknown transport id " + std::to_string(out->transport);
    return Status::RemoteError;
  }
  out->host.assign(reinterpret_cast<const char*>(host.data()), host.size());
  out->mac.assign(mac.begin(), mac.end());
  out->blob.assign(blob.begin(), blob.end());
  return Status::Ok;
}

Digest helloDigest(const Hello& h) {
  Hello plain = h;
  plain.mac.clear();
  return sha256(encodeHello(plain));
}

std::vector<uint8_t> proofMessage(char kind, std::span<const uint8_t> first, std::span<const uint8_t> second) {
  std::vector<uint8_t> m = {'I', 'C', 'N', '2', static_cast<uint8_t>(kind)};
  m.insert(m.end(), first.begin(), first.end());
  m.insert(m.end(), second.begin(), second.end());
  return m;
}

}  // namespace icn
