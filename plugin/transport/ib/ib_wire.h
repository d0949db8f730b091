// Everything that crosses the wire between two ib comms, with explicit layouts so both ends (and tests) agree:
//  - the connection blob carried in the handshake HELLO (QP numbers, GIDs/LIDs, MTU, FIFO address/rkeys),
//  - the clear-to-send (CTS) FIFO entries the receiver RDMA-writes into the sender's memory,
//  - the 32-bit immediate of the sender's write-with-immediate,
//  - how a message is split into chunks across the QPs of a connection.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/transport.h"
#include "core/wire_fingerprint.h"

namespace icn::ib {

constexpr int kMaxQps = 16;             // per connection: 4 bits of the immediate
constexpr int kFifoSlots = kMaxRequests;  // 32 receive requests in flight
constexpr uint8_t kBlobVersion = 1;

// One CTS entry: where the sender may write one message of a (possibly grouped) receive. The receiver writes
// the whole slot (nreqs entries) with one RDMA write; `seq` (request sequence + 1) is last so a sender that
// sees the right seq sees a complete entry (RDMA writes land in address order on every provider we target).
struct CtsEntry {
  uint64_t addr;
  uint32_t rkeys[kMaxVDevMembers];  // one per member device of a fused virtual device
  uint64_t size;
  int32_t tag;
  uint32_t nreqs;
  uint32_t pad;
  uint32_t seq;  // read by the sender with an acquire load (std::atomic_ref)
};
static_assert(sizeof(CtsEntry) == 48, "CTS entry layout is part of the wire format");

using CtsSlot = std::array<CtsEntry, kMaxRecvs>;
static_assert(sizeof(CtsSlot) == 48 * kMaxRecvs);

// Immediate: slot (5 bits) | sub-request (3) | chunks-1 (4) | low 20 bits of the request sequence.
struct Imm {
  uint32_t slot = 0, sub = 0, nchunks = 1, seq = 0;
};
uint32_t encodeImm(const Imm& imm);
Imm decodeImm(uint32_t v);
constexpr uint32_t kImmSeqMask = (1u << 20) - 1;

// Splits `size` bytes over at most `nqps` QPs. Small messages stay on one QP (splitting only adds work);
// chunks are 128-byte aligned except the last. Returns the number of chunks (>= 1, a zero-byte message is one
// empty chunk); offsets/lengths filled for each.
int splitMessage(uint64_t size, int nqps, uint64_t offsets[kMaxQps], uint64_t lengths[kMaxQps]);
constexpr uint64_t kMinChunk = 64 * 1024;

struct DevAddr {
  std::array<uint8_t, 16> gid{};
  uint16_t lid = 0;
  uint8_t ethernet = 0;   // RoCE: address by GID (global routing header)
  uint8_t mtu = 0;        // enum ibv_mtu of the active port
};

struct ConnBlob {
  std::vector<DevAddr> devs;     // one per member device (1 for a physical device)
  std::vector<uint32_t> qpns;    // QP i belongs to device i % devs.size()
  uint64_t fifoAddr = 0;         // sender only: its CTS FIFO
  std::array<uint32_t, kMaxVDevMembers> fifoRkeys{};
  uint64_t flushAddr = 0;        // unused on the wire today, reserved
};

// What a peer's code assumes of ours: changing any value in this list changes the wire. Bump kBlobVersion with it
// and record the new fingerprint for the new version in test/unit/wire_version_test.cc (docs/adding.md).
constexpr uint64_t kWireFingerprint = wireFingerprint({
    kBlobVersion, kMaxQps, kFifoSlots, kMaxRecvs, kMaxVDevMembers, kImmSeqMask, sizeof(CtsEntry),
    offsetof(CtsEntry, addr), offsetof(CtsEntry, rkeys), offsetof(CtsEntry, size), offsetof(CtsEntry, tag),
    offsetof(CtsEntry, nreqs), offsetof(CtsEntry, seq), sizeof(CtsSlot)});

std::vector<uint8_t> encodeBlob(const ConnBlob& b);
Status decodeBlob(std::span<const uint8_t> bytes, ConnBlob* out, std::string* why);

}  // namespace icn::ib
