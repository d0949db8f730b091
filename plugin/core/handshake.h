// Out-of-band connection set-up over one TCP socket, fully non-blocking (wire version 2).
//
//   connector                                   acceptor
//                                        ◀──   CHALLENGE(nonceA)                sent at accept
//      HELLO_C(identity, blob_c, nonceC, tagC) ──▶
//                                              check tagC, commId: the peer is live (it answered our fresh nonce)
//                                              and, with a key, holds it. PeerKnown: only now does the transport
//                                              create resources for it, then confirm(blob_a)
//                                        ◀──   HELLO_A(identity, blob_a, nonceA, tagA)
//   check nonce, tagA, commId. PeerKnown: set up, confirm()
//      READY(tagR)                       ──▶
//   Done                                        Done
//
// identity = transport, commId, rank, pid, host. With D(h) = SHA-256 of HELLO h encoded with an empty tag:
//   tagC = T("ICN2" 'C' | nonceA | D(HELLO_C))       tagA = T("ICN2" 'A' | D(HELLO_C) | D(HELLO_A))
//   tagR = T("ICN2" 'R' | D(HELLO_C) | D(HELLO_A))
// T is HMAC-SHA256 with the job key (ICN_AUTH_KEY), or plain SHA-256 without one (catches corruption, not
// attackers). Every field of both HELLOs and both fresh nonces are covered, so a captured HELLO cannot be
// replayed or rewritten, and a connection made for another communicator is refused. The blob is
// transport-specific (UCX worker address, QP numbers/GIDs/FIFO rkey) and is parsed only after its tag checked.
// The whole exchange must finish within ICN_CONNECT_TIMEOUT_MS of its start, however slowly bytes trickle in. Nothing
// else may be sent: a byte a peer sends where the diagram has none (after HELLO_A at the connector; between HELLO_C
// and HELLO_A, or after READY, at the acceptor) fails the handshake, and at most one frame is ever buffered.
// After Done the socket stays open as the control channel: its closing is how a dead peer is noticed.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/net_counters.h"
#include "core/socket.h"
#include "core/status.h"
#include "core/wire_fingerprint.h"

namespace icn {

constexpr uint32_t kWireMagic = 0x49434e31;  // "ICN1"
constexpr uint16_t kWireVersion = 2;
constexpr size_t kMaxFramePayload = 64 * 1024;
// The most a handshake buffers from its peer: one whole frame of the largest size.
constexpr size_t kMaxHandshakeInput = 12 + kMaxFramePayload;

enum class FrameType : uint16_t { Hello = 1, Ready = 2, Challenge = 3 };

// What a peer's code assumes of ours: changing any value in this list (or the HELLO's encoding) changes the wire.
// Bump kWireVersion with it and record the new fingerprint for the new version in test/unit/wire_version_test.cc.
constexpr uint64_t kWireFingerprint =
    wireFingerprint({kWireMagic, kWireVersion, kMaxFramePayload, 12, uint16_t(FrameType::Hello),
                     uint16_t(FrameType::Ready), uint16_t(FrameType::Challenge)});

struct Hello {
  uint8_t transport = 0;  // 1 = ucx, 2 = ib
  uint64_t commId = 0;
  int32_t rank = -1;
  uint32_t pid = 0;
  std::string host;
  uint8_t nonce[16] = {};     // connector: nonceC; acceptor: nonceA, the one its CHALLENGE carried
  std::vector<uint8_t> mac;   // tagC / tagA (see above); the decoder accepts 0 or 32 bytes
  std::vector<uint8_t> blob;  // transport payload
  bool fresh = false;         // not on the wire: nonce drawn from the kernel's random source (makeLocalHello)
};

// Codec (separate so it can be fuzzed): frame = magic u32 | version u16 | type u16 | length u32 | payload.
std::vector<uint8_t> encodeFrame(FrameType type, std::span<const uint8_t> payload);
std::vector<uint8_t> encodeHello(const Hello& h);
Status decodeHello(std::span<const uint8_t> payload, Hello* out, std::string* why);
// Parses a 12-byte header; rejects wrong magic/version/type and oversized lengths.
Status decodeFrameHeader(std::span<const uint8_t, 12> header, FrameType* type, uint32_t* length, std::string* why);
// D(h) above: SHA-256 of the HELLO encoded with an empty tag field.
std::array<uint8_t, 32> helloDigest(const Hello& h);
// The bytes a tag covers: "ICN2" | kind ('C', 'A' or 'R') | first | second (see above). Exposed for tests and
// tools that play a peer; the handshake tags them with auth::tag.
std::vector<uint8_t> proofMessage(char kind, std::span<const uint8_t> first, std::span<const uint8_t> second);

class Handshake {
 public:
  enum class Role { Connector, Acceptor };
  enum class Phase { InProgress, PeerKnown, Done };

  // The deadline (ICN_CONNECT_TIMEOUT_MS) counts from `start`: for a connector, when its TCP connect began.
  Handshake(Fd fd, Role role, std::string peerName, Hello local,
            std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now());
  // Drives I/O; never blocks. Returns an error (already logged with the peer's name) on protocol
  // violation, auth failure, EOF or the deadline.
  Status progress(Phase* phase);
  // The transport accepted the peer's blob; the exchange may finish. The acceptor passes its own blob
  // here (its resources are created once the peer proved itself); the connector gave its blob up front.
  void confirm(std::vector<uint8_t> acceptorBlob = {});
  // PeerKnown or later: the peer's HELLO passed every check.
  bool peerProven() const { return helloReceived_; }
  const Hello& peer() const { return peer_; }
  const std::string& peerName() const { return peerName_; }
  Fd takeFd() { return std::move(fd_); }
  int fd() const { return fd_.get(); }

 private:
  Status pump();  // write pending bytes, read into the frame buffer (up to the frame's end or kMaxHandshakeInput)
  // Whether the protocol lets the peer send anything in the current state (bytes it sends otherwise, before our
  // part is over, fail the handshake: nothing a peer sends waits unparsed).
  bool peerMaySend() const;
  // The connector's READY is queued, or the acceptor has READY: the handshake reads nothing more.
  bool ourPartOver() const;
  // Bytes still to read to the end of the frame being received (0: it is whole, or its header is bad).
  size_t bytesToFrameEnd() const;
  Status onFrame(FrameType type, std::span<const uint8_t> payload);
  Status onChallenge(std::span<const uint8_t> payload);
  Status onHello(std::span<const uint8_t> payload);
  Status onReady(std::span<const uint8_t> payload);
  void queue(FrameType type, std::span<const uint8_t> payload);
  Status fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  const char* waitingFor() const;

  Fd fd_;
  Role role_;
  std::string peerName_;
  Hello local_;
  Hello peer_;
  uint8_t nonceA_[16] = {};  // the acceptor's challenge (ours or the peer's)
  std::array<uint8_t, 32> digestC_{}, digestA_{};
  bool eof_ = false, challenged_ = false, helloReceived_ = false, confirmed_ = false, helloSent_ = false,
       readyDone_ = false;
  std::vector<uint8_t> out_;
  size_t outOff_ = 0;
  std::vector<uint8_t> in_;
  std::chrono::steady_clock::time_point deadline_;
};

// Telemetry identity of a connection to the peer that sent this HELLO (both transports use it).
NetCommInfo netCommInfo(const Hello& peer, uint64_t commId, bool isSend);

// Local identity for HELLO: host name, pid, our rank for commId if known, a fresh nonce (`fresh` false, and a
// WARN logged, when the kernel gave no random bytes: the handshake then refuses to start).
Hello makeLocalHello(uint8_t transport, uint64_t commId, std::vector<uint8_t> blob);

}  // namespace icn
