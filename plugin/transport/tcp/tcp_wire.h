// Wire formats of the TCP transport. A connection is a control socket (the handshake's, watched for peer
// death), lane 0 (written and read by NCCL's proxy thread itself: clear-to-send records from the receiver,
// small messages from the sender; with failover over two rails, on two sockets carrying the same bytes:
// tcp_lane0.h) and N helper lanes (one thread each; large messages are split across them).
//
//   receiver irecv: CTS {seq, slot, n, credits returned (small, large), (tag, posted size) x n} on lane 0
//   sender isend:   takes the CTS entry with its tag, then sends chunks {seq, slot, index, tag, total, offset,
//                   length} + payload on any lane; the receiver checks every field against what it posted
//   eager:          a message may go before its CTS (spending a credit of its kind) when the sender has consumed
//                   every CTS it has read and has nothing queued; it carries the number of CTS records the sender had
//                   read (its horizon H) and its eager number (the sender's count of eager messages before it),
//                   and belongs to the first receive entry with its tag, in records >= H, not taken by an earlier
//                   eager message. Both sides apply that rule (the sender when the records arrive), so they agree
//                   without a round trip; the receiver applies it in eager-number order per tag, once it has seen
//                   every lower number. Small ones (<= the agreed eager limit) go on lane 0 and the receiver stages
//                   them in one of kEagerCredits slots when their receive is not posted yet; larger ones (up to
//                   kEarlyCredits of them) go whole on one helper lane, where the receiver leaves them in the socket (the kernel's buffer)
//                   until their receive is posted. While any eager message is unresolved on a helper lane (the
//                   sender has not read the record it belongs to), every eager message has its tag and nothing
//                   else is queued behind it on that lane, so a held lane only holds what belongs after it.
//                   Unresolved ones may spread over several helper lanes (ICN_TCP_EARLY_LANES), each carrying
//                   them in eager-number order: the lowest number not yet placed is at the head of its lane, so
//                   once its receive is posted that lane goes on, whatever the other lanes hold.
//   failover:       over two or more rails, a large send completes once the peer's TCP acknowledged its pieces;
//                   a failed helper lane is given up (lane-down header on lane 0), closed by the receiver (lane-
//                   closed record), its unacknowledged pieces resent (flag kChunkResend) on the others, then
//                   offered again (lane-offer header) and joined by a new lane handshake (below, kChunkLaneOffer).
//   checks:         credits come back only in records, so eager number n (both kinds counted together) spends
//                   one the sender started with or one handed back in a record before its horizon, and the
//                   horizon names only records written whole; a data piece names only a receive whose record was
//                   written; the pieces of a message never overlap (each byte is written once). A lane that the
//                   peer must be reading (a matched piece, an eager message whose record was read, the records)
//                   and that writes nothing for ICN_PEER_TIMEOUT_MS fails the connection.
//
// Every record is little-endian and fixed-size, so a reader never allocates on a peer's word.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/transport.h"
#include "core/wire_fingerprint.h"

namespace icn::tcp {

static_assert(std::endian::native == std::endian::little, "the TCP wire format is little-endian");

constexpr int kMaxLanes = 16;  // helper lanes per connection
constexpr uint32_t kChunkMagic = 0x44544349;  // "ICTD"
constexpr uint32_t kCtsMagic = 0x43544349;    // "ICTC"
// Messages are at most 2 GiB - 1 (NCCL's test() reports sizes as int), so 32-bit sizes suffice.
constexpr uint32_t kMaxMessage = 0x7fffffffu;
constexpr uint16_t kChunkEager = 1;
// Failover between helper lanes (a connection over two or more rails): the sender gives up a lane that failed
// with a lane-down header on lane 0 (slot: the lane; no payload); the receiver reads what the lane still holds,
// drops a piece it cut short, and answers with a lane-closed record; then the sender resends, flagged as resent, the
// pieces of the lane whose bytes its peer's TCP had not acknowledged. A resent piece that the receiver already has
// whole (or whose receive completed) is read and dropped: each byte is still placed once.
constexpr uint16_t kChunkResend = 2;
constexpr uint16_t kChunkLaneDown = 4;
// Recovery: the sender listens on the given-up lane's local address again and offers it in a lane-offer header on
// lane 0 (slot: the lane; offset: the port); the receiver connects there from its own end of the lane, with
// backoff, and the two run the lane handshake again (token, lane index, the job key). Then the lane carries
// pieces again. Lane 0's copies (tcp_lane0.h) come back the same way: a lane offer with slot 0 and index the copy
// (0: the handshake's rail, 1: the other), answered by a handshake of kind kBlobLane0Copy.
constexpr uint16_t kChunkLaneOffer = 8;
constexpr uint32_t kLaneMagic = 0x4c544349;  // "ICTL": a lane-closed record, receiver to sender on lane 0
// A receive-done record (receiver to sender on lane 0, with failover): the receive with this sequence number has
// every byte placed. A sender that gave up a lane while pieces on it waited only for their acknowledgement (lost
// with the link after the bytes arrived) completes those sends on it: the receiver, done, may post nothing more
// that would read the lane-down and answer lane-closed until those very sends complete.
constexpr uint32_t kDoneMagic = 0x46544349;  // "ICTF"
// Eager messages a sender may have unconsumed, by kind: small ones on lane 0 (each may take one of the
// receiver's stage slots) and large ones on helper lanes (held in the socket, costing the receiver nothing).
// The large ones bound how far a sender runs ahead of a receiver that is not posting (on a GPU shared by two
// processes, for the whole of the other process's turn): 32 x 128 KiB steps were measured to stall the sender.
constexpr uint32_t kEagerCredits = 64;
constexpr uint32_t kEarlyCredits = 192;
constexpr uint32_t kEagerWindow = kEagerCredits + kEarlyCredits;  // eager numbers unconsumed at once
static_assert(kEagerCredits >= 1 && kEagerCredits <= 64, "the receiver keeps its stage slots in a 64-bit mask");
static_assert(kEagerCredits <= 255 && kEarlyCredits <= 255, "a record hands back up to 255 of each");
constexpr uint32_t kMaxEagerBytes = 65536;   // largest eager message on lane 0 (staged by the receiver)

struct ChunkHeader {
  uint32_t magic = kChunkMagic;
  uint32_t seq = 0;     // the receive's sequence number
  uint8_t slot = 0;     // the receiver's request slot (< kMaxRequests)
  uint8_t index = 0;    // which of the grouped receives (< kMaxRecvs)
  uint16_t flags = 0;   // kChunkEager: seq is the sender's horizon, slot and index are 0
  int32_t tag = 0;
  uint32_t total = 0;   // the whole message
  uint32_t offset = 0;  // of this piece
  uint32_t length = 0;  // payload bytes following this header
  uint32_t eager = 0;   // kChunkEager: the eager number; 0 otherwise
};
static_assert(sizeof(ChunkHeader) == 32);

struct CtsHeader {
  uint32_t magic = kCtsMagic;
  uint32_t seq = 0;
  uint8_t slot = 0;
  uint8_t n = 0;
  uint8_t credits = 0;       // small eager credits handed back with this record
  uint8_t earlyCredits = 0;  // large ones
};
// Same size as a CtsHeader: the sender tells them apart by magic.
struct LaneRecord {
  uint32_t magic = kLaneMagic;
  uint32_t lane = 0;  // the helper lane the receiver has stopped reading (1 .. lanes)
  uint32_t reserved = 0;
};
static_assert(sizeof(LaneRecord) == 12);
struct DoneRecord {
  uint32_t magic = kDoneMagic;
  uint32_t seq = 0;  // the receive's sequence number (its clear-to-send record's)
  uint32_t reserved = 0;
};
static_assert(sizeof(DoneRecord) == 12);
struct CtsEntry {
  int32_t tag = 0;
  uint32_t size = 0;  // posted bytes, clamped to kMaxMessage
};
static_assert(sizeof(CtsHeader) == 12 && sizeof(CtsEntry) == 8);
constexpr size_t kMaxCtsBytes = sizeof(CtsHeader) + kMaxRecvs * sizeof(CtsEntry);

// Handshake blobs. Control connection: the connector proposes its lane count and a random token that its lane
// connections repeat; the acceptor answers with the count both use (the smaller) and the addresses its listener
// also accepts lanes on, one per rail (interface) besides the handshake's. Lane connection: the token and the
// lane's index (0 .. lanes). The connector puts a helper lane on a rail only when the rail's address lies in the
// subnet of one of its own interfaces (so a peer's word never sends a connection off the hosts' shared links).
// Lane 0 on two rails (transport/tcp/tcp_lane0.h): an acceptor with failover on says so in its control answer
// (kBlobFlagMirror); a connector with failover on and a second rail to the peer then opens lane 0's copy there, a
// lane connection of kind kBlobLane0Copy (value 0), before its control READY, and both ends write lane 0's bytes to
// both sockets.
constexpr uint8_t kBlobControl = 1;
constexpr uint8_t kBlobLane = 2;
constexpr uint8_t kBlobLane0Copy = 3;
constexpr uint8_t kBlobFlagMirror = 1;
constexpr uint8_t kBlobVersion = 6;
constexpr size_t kTokenSize = 16;
constexpr int kMaxRails = 4;  // interfaces one connection spreads its helper lanes over

// A rail's listening address: IPv4 (family 4, the first 4 bytes of addr) or IPv6 (family 6), and a port.
struct RailAddr {
  uint8_t family = 0;
  uint16_t port = 0;
  uint8_t addr[16] = {};
};

struct Blob {
  uint8_t kind = 0;
  uint16_t value = 0;       // control: helper lanes; lane: its index
  uint32_t eagerBytes = 0;  // control: largest eager message (0: none)
  uint8_t token[kTokenSize] = {};
  uint8_t nrails = 0;       // control: the acceptor's extra rails (the connector sends none)
  RailAddr rails[kMaxRails];
  uint8_t flags = 0;        // control: kBlobFlagMirror (the acceptor takes lane 0's copy)
};

// What a peer's code assumes of ours: changing any value in this list changes the wire. Bump kBlobVersion with it
// (peers of different versions refuse each other at connect) and record the new fingerprint for the new version in
// test/unit/wire_version_test.cc (docs/adding.md, "A TCP wire constant").
constexpr uint64_t kWireFingerprint = wireFingerprint({
    kBlobVersion, kMaxLanes, kMaxRails, sizeof(RailAddr::addr), kChunkMagic, kCtsMagic, kMaxMessage, kChunkEager, kEagerCredits, kEarlyCredits,
    kMaxEagerBytes, kChunkResend, kChunkLaneDown, kChunkLaneOffer, kLaneMagic, sizeof(LaneRecord), kDoneMagic, sizeof(DoneRecord), kMaxRecvs, kMaxRequests, kBlobControl, kBlobLane, kBlobLane0Copy, kBlobFlagMirror, kTokenSize,
    sizeof(ChunkHeader), offsetof(ChunkHeader, seq), offsetof(ChunkHeader, slot), offsetof(ChunkHeader, index),
    offsetof(ChunkHeader, flags), offsetof(ChunkHeader, tag), offsetof(ChunkHeader, total),
    offsetof(ChunkHeader, offset), offsetof(ChunkHeader, length), offsetof(ChunkHeader, eager),
    sizeof(CtsHeader), offsetof(CtsHeader, seq), offsetof(CtsHeader, slot), offsetof(CtsHeader, n),
    offsetof(CtsHeader, credits), offsetof(CtsHeader, earlyCredits), sizeof(CtsEntry), offsetof(CtsEntry, size)});

std::vector<uint8_t> encodeBlob(const Blob& b);
// Rejects anything but an exact, well-formed blob; *why says what was wrong.
Status decodeBlob(std::span<const uint8_t> raw, Blob* out, std::string* why);

// Records a receiver keeps waiting to be written per connection: one per live receive, one per receive that eager
// messages completed before its record went out.
constexpr uint32_t kMaxUnsentRecords = kMaxRequests + kEagerWindow;
// Pieces of one message: one per helper lane, or lane 0 alone.
constexpr int kMaxPieces = kMaxLanes + 1;

// The limits above as a Markdown table (`icn-params --wire-limits`), the one the docs show: prose names the
// constants, this table gives their values.
std::string wireLimitsMarkdown();

// Checks a CTS header: magic, sequence, slot and count. *why on failure.
bool validCts(const CtsHeader& h, uint32_t expectSeq, std::string* why);
// Checks a chunk header in isolation (magic, flags, reserved fields, offset + length within total and kMaxMessage;
// an eager message in one piece of at most eagerLimit: the agreed limit on lane 0, kMaxMessage on helper lanes).
bool validChunk(const ChunkHeader& h, uint32_t eagerLimit, std::string* why);

}  // namespace icn::tcp
