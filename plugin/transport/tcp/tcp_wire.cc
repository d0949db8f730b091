#include "transport/tcp/tcp_wire.h"

#include <cstring>

#include "core/wire.h"

namespace icn::tcp {

std::vector<uint8_t> encodeBlob(const Blob& b) {
  WireWriter w;
  w.put<uint8_t>(b.kind);
  w.put<uint8_t>(kBlobVersion);
  w.put<uint16_t>(b.value);
  w.put<uint32_t>(b.eagerBytes);
  w.bytes(std::span<const uint8_t>(b.token, kTokenSize));
  return std::move(w.buffer());
}

Status decodeBlob(std::span<const uint8_t> raw, Blob* out, std::string* why) {
  WireReader r(raw);
  uint8_t version = 0;
  std::span<const uint8_t> token;
  if (!r.get(&out->kind) || !r.get(&version) || !r.get(&out->value) || !r.get(&out->eagerBytes) || !r.bytes(kTokenSize, &token) || !r.atEnd()) {
    *why = "malformed TCP connection blob (" + std::to_string(raw.size()) + " bytes)";
    return Status::RemoteError;
  }
  if (version != kBlobVersion || (out->kind != kBlobControl && out->kind != kBlobLane)) {
    *why = "malformed TCP connection blob (version " + std::to_string(version) + ", kind " + std::to_string(out->kind) +
           ")";
    return Status::RemoteError;
  }
  if (out->value > kMaxLanes) {
    *why = "malformed TCP connection blob (lane " + std::to_string(out->value) + " of at most " +
           std::to_string(kMaxLanes) + ")";
    return Status::RemoteError;
  }
  if (out->eagerBytes > kMaxEagerBytes) {
    *why = "malformed TCP connection blob (eager limit " + std::to_string(out->eagerBytes) + " bytes)";
    return Status::RemoteError;
  }
  memcpy(out->token, token.data(), kTokenSize);
  return Status::Ok;
}

bool validCts(const CtsHeader& h, uint32_t expectSeq, std::string* why) {
  if (h.magic != kCtsMagic) {
    *why = "garbage where a clear-to-send record was expected";
    return false;
  }
  if (h.seq != expectSeq) {
    *why = "clear-to-send record " + std::to_string(h.seq) + " out of order (expected " + std::to_string(expectSeq) + ")";
    return false;
  }
  if (h.slot >= kMaxRequests || h.n < 1 || h.n > kMaxRecvs || h.credits > kEagerCredits ||
      h.earlyCredits > kEarlyCredits) {
    *why = "clear-to-send record with slot " + std::to_string(h.slot) + ", " + std::to_string(h.n) + " receives and " +
           std::to_string(h.credits) + " + " + std::to_string(h.earlyCredits) + " credits";
    return false;
  }
  return true;
}

bool validChunk(const ChunkHeader& h, uint32_t eagerLimit, std::string* why) {
  if (h.magic != kChunkMagic || (h.flags & ~kChunkEager) != 0 || (!(h.flags & kChunkEager) && h.eager != 0)) {
    *why = "garbage where a message header was expected";
    return false;
  }
  if (h.slot >= kMaxRequests || h.index >= kMaxRecvs) {
    *why = "message header for receive slot " + std::to_string(h.slot) + " index " + std::to_string(h.index);
    return false;
  }
  if (h.total > kMaxMessage || h.offset > h.total || h.length > h.total - h.offset) {
    *why = "message piece [" + std::to_string(h.offset) + ", +" + std::to_string(h.length) + ") outside its " +
           std::to_string(h.total) + "-byte message";
    return false;
  }
  if ((h.flags & kChunkEager) && (h.total > eagerLimit || h.length != h.total || h.slot || h.index)) {
    *why = "eager message of " + std::to_string(h.total) + " bytes (limit " + std::to_string(eagerLimit) +
           ") or not in one piece";
    return false;
  }
  return true;
}

}  // namespace icn::tcp
