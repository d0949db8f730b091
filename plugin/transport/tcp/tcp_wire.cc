#include "transport/tcp/tcp_wire.h"

#include <bit>
#include <cstring>

#include "core/handshake.h"
#include "core/wire.h"

namespace icn::tcp {

std::vector<uint8_t> encodeBlob(const Blob& b) {
  WireWriter w;
  w.put<uint8_t>(b.kind);
  w.put<uint8_t>(kBlobVersion);
  w.put<uint16_t>(b.value);
  w.put<uint32_t>(b.eagerBytes);
  w.bytes(std::span<const uint8_t>(b.token, kTokenSize));
  if (b.kind == kBlobControl) {
    w.put<uint8_t>(b.nrails);
    for (int i = 0; i < b.nrails && i < kMaxRails; i++) {
      w.put<uint8_t>(b.rails[i].family);
      w.put<uint16_t>(b.rails[i].port);
      w.bytes(std::span<const uint8_t>(b.rails[i].addr, sizeof b.rails[i].addr));
    }
    w.put<uint8_t>(b.flags);
  }
  return std::move(w.buffer());
}

namespace {
bool decodeRails(WireReader& r, Blob* out, std::string* why) {
  if (!r.get(&out->nrails)) return false;
  if (out->nrails > kMaxRails) {
    *why = "malformed TCP connection blob (" + std::to_string(out->nrails) + " rails, at most " +
           std::to_string(kMaxRails) + ")";
    return false;
  }
  for (int i = 0; i < out->nrails; i++) {
    RailAddr& a = out->rails[i];
    std::span<const uint8_t> ip;
    if (!r.get(&a.family) || !r.get(&a.port) || !r.bytes(sizeof a.addr, &ip)) return false;
    memcpy(a.addr, ip.data(), sizeof a.addr);
    if ((a.family != 4 && a.family != 6) || a.port == 0) {
      *why = "malformed TCP connection blob (rail " + std::to_string(i) + ": family " + std::to_string(a.family) +
             ", port " + std::to_string(a.port) + ")";
      return false;
    }
  }
  return true;
}
}  // namespace

Status decodeBlob(std::span<const uint8_t> raw, Blob* out, std::string* why) {
  WireReader r(raw);
  uint8_t version = 0;
  std::span<const uint8_t> token;
  out->nrails = 0;
  why->clear();
  bool ok = r.get(&out->kind) && r.get(&version) && r.get(&out->value) && r.get(&out->eagerBytes) &&
            r.bytes(kTokenSize, &token);
  out->flags = 0;
  if (ok && version == kBlobVersion && out->kind == kBlobControl) ok = decodeRails(r, out, why) && r.get(&out->flags);
  if (!ok || !r.atEnd()) {
    if (why->empty()) *why = "malformed TCP connection blob (" + std::to_string(raw.size()) + " bytes)";
    return Status::RemoteError;
  }
  if (version != kBlobVersion || (out->kind != kBlobControl && out->kind != kBlobLane && out->kind != kBlobLane0Copy) ||
      (out->kind == kBlobLane0Copy && out->value != 0) || (out->flags & ~kBlobFlagMirror) != 0) {
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
  constexpr uint16_t kKnown = kChunkEager | kChunkResend | kChunkLaneDown | kChunkLaneOffer;
  if (h.magic != kChunkMagic || (h.flags & ~kKnown) != 0 || (!(h.flags & kChunkEager) && h.eager != 0) ||
      std::popcount(static_cast<unsigned>(h.flags)) > 1) {
    *why = "garbage where a message header was expected";
    return false;
  }
  if (h.flags & kChunkLaneOffer) {
    // slot 0: lane 0's copy `index` (tcp_lane0.h)
    if (h.slot > kMaxLanes || h.offset == 0 || h.offset > 65535 || (h.slot == 0 ? h.index > 1 : h.index != 0) ||
        h.tag || h.total || h.length || h.seq) {
      *why = "lane offer for lane " + std::to_string(h.slot) + " with stray fields";
      return false;
    }
    return true;
  }
  if (h.flags & kChunkLaneDown) {
    if (h.slot == 0 || h.slot > kMaxLanes || h.index || h.tag || h.total || h.offset || h.length || h.seq) {
      *why = "lane-down header for lane " + std::to_string(h.slot) + " with stray fields";
      return false;
    }
    return true;
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

std::string wireLimitsMarkdown() {
  struct Row {
    const char* name;
    uint64_t value;
    const char* meaning;
  };
  const Row rows[] = {
      {"kMaxLanes", kMaxLanes, "helper lanes per connection (`ICN_TCP_STREAMS` at most)"},
      {"kMaxRails", kMaxRails, "interfaces one connection spreads its helper lanes over (`ICN_TCP_RAILS` at most)"},
      {"kMaxPieces", kMaxPieces, "pieces of one message: one per helper lane, or lane 0 alone"},
      {"kMaxRecvs", kMaxRecvs, "receives grouped in one irecv (NCCL's maximum)"},
      {"kMaxRequests", kMaxRequests, "requests in flight per comm"},
      {"kEagerCredits", kEagerCredits,
       "small messages a sender may have sent before their clear-to-send records (the receiver stages each in a slot)"},
      {"kEarlyCredits", kEarlyCredits,
       "larger messages sent before their records, each whole on a helper lane (held in the receiver's socket)"},
      {"kEagerWindow", kEagerWindow, "eager messages of both kinds unconsumed at once: what a sender starts with"},
      {"kMaxEagerBytes", kMaxEagerBytes, "largest small eager message (`ICN_TCP_EAGER_BYTES` at most)"},
      {"kMaxMessage", kMaxMessage, "largest message, in bytes"},
      {"kMaxUnsentRecords", kMaxUnsentRecords,
       "clear-to-send records a receiver keeps waiting to be written per connection"},
      {"kMaxCtsBytes", kMaxCtsBytes, "bytes of one clear-to-send record, at most"},
      {"kMaxFramePayload", kMaxFramePayload, "payload of one handshake frame (a handshake buffers one frame)"},
  };
  std::string out = "| Constant | Value | Meaning |\n|---|---|---|\n";
  for (const Row& r : rows)
    out += std::string("| `") + r.name + "` | " + std::to_string(r.value) + " | " + r.meaning + " |\n";
  return out;
}

}  // namespace icn::tcp
