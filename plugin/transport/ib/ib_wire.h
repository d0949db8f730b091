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
constexpr uint8_t kBlobVersion = 3;  // 3: rejoin offers and their answers carry the offer's number

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

// Immediate: slot (5 bits) | sub-request (3) | chunks-1 (4) | chunk index (4) | low 16 bits of the request
// sequence. The chunk index lets the receiver count each chunk once: after a failover the sender resends only
// the chunks the receiver reports missing, and a second copy of a chunk is a protocol error.
struct Imm {
  uint32_t slot = 0, sub = 0, nchunks = 1, seq = 0, chunk = 0;
};
uint32_t encodeImm(const Imm& imm);
Imm decodeImm(uint32_t v);
constexpr uint32_t kImmSeqMask = (1u << 16) - 1;

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

// Failover notes on the control connection of a comm whose both ends have the same number of member devices
// (link k = member k on both sides, QP i on link i % members). Fence: "link k is dead to me: stop taking writes
// on it and tell me what you hold". Report (receiver to sender, after its QPs of link k are in the error state
// and its completions drained): every receive still waiting for data, with the chunks each sub-request holds,
// and the sequence number of its next receive (receives below it that are not listed are complete).
// Re-admission of a dead link, driven by the sender: Rejoin offers its new QPs for the link, the receiver answers
// Accept with its own (connected to the sender's) or Refuse (its port is not back yet).
enum class NoteType : uint8_t { Fence = 1, Report = 2, Rejoin = 3, Accept = 4, Refuse = 5 };
struct PendingRecv {
  uint8_t slot = 0;
  uint8_t nsub = 1;
  uint32_t seq = 0;
  std::array<uint16_t, kMaxRecvs> have{};  // bit c: chunk c of that sub-request is in
};
struct FailoverNote {
  NoteType type = NoteType::Fence;
  uint8_t link = 0;
  uint32_t nextSeq = 0;               // report only
  // Rejoin: the sender's number for this offer; accept and refuse: the offer they answer. An answer that comes
  // after its offer was given up must not connect the QPs of a later one (they would point at each other's
  // retired QPs, and the first write on them would fail).
  uint32_t offer = 0;
  std::vector<PendingRecv> pending;   // report only, at most kFifoSlots
  std::vector<uint32_t> qpns;         // rejoin and accept: the QPs of the link, in QP index order (<= kMaxQps)
};
std::vector<uint8_t> encodeNote(const FailoverNote& n);
Status decodeNote(std::span<const uint8_t> bytes, FailoverNote* out, std::string* why);

}  // namespace icn::ib
