// Out-of-band connection set-up over one TCP socket, fully non-blocking.
//
//   connector                      acceptor
//      HELLO(blob, nonceC)  ──▶
//                                  PeerKnown: transport sets up with the peer's blob, confirm()
//                           ◀──   HELLO(blob, nonceA, mac_a)
//   PeerKnown: set up, confirm()
//      READY(mac_c)         ──▶
//   Done                           Done
//
// The blob is transport-specific (UCX worker address, QP numbers/GIDs/FIFO rkey). Each HELLO carries a tag over
// role | nonceC | nonceA | SHA-256(blob) ('H' with a zero nonceA for the connector, 'A' for the acceptor), checked
// before the blob is used; READY carries HMAC(key, 'C' | nonceC | nonceA). With ICN_AUTH_KEY the tags are
// HMAC-SHA256 with the key; without it they are plain SHA-256 (catches garbage, not attackers) and READY's is empty.
// After Done the socket stays open as the control channel: its closing is how a dead peer is noticed.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/net_counters.h"
#include "core/socket.h"
#include "core/status.h"

namespace icn {

constexpr uint32_t kWireMagic = 0x49434e31;  // "ICN1"
constexpr uint16_t kWireVersion = 1;
constexpr size_t kMaxFramePayload = 64 * 1024;

enum class FrameType : uint16_t { Hello = 1, Ready = 2 };

struct Hello {
  uint8_t transport = 0;  // 1 = ucx, 2 = ib
  uint64_t commId = 0;
  int32_t rank = -1;
  uint32_t pid = 0;
  std::string host;
  uint8_t nonce[16] = {};
  std::vector<uint8_t> mac;   // HELLO: 32-byte tag (auth::helloTag); decoder accepts 0 or 32
  std::vector<uint8_t> blob;  // transport payload
};

// Codec (separate so it can be fuzzed): frame = magic u32 | version u16 | type u16 | length u32 | payload.
std::vector<uint8_t> encodeFrame(FrameType type, std::span<const uint8_t> payload);
std::vector<uint8_t> encodeHello(const Hello& h);
Status decodeHello(std::span<const uint8_t> payload, Hello* out, std::string* why);
// Parses a 12-byte header; rejects wrong magic/version/type and oversized lengths.
Status decodeFrameHeader(std::span<const uint8_t, 12> header, FrameType* type, uint32_t* length, std::string* why);

class Handshake {
 public:
  enum class Role { Connector, Acceptor };
  enum class Phase { InProgress, PeerKnown, Done };

  Handshake(Fd fd, Role role, std::string peerName, Hello local);
  // Drives I/O; never blocks. Returns an error (already logged with the peer's name) on protocol
  // violation, auth failure, EOF or timeout.
  Status progress(Phase* phase);
  // The transport accepted the peer's blob; the exchange may finish. The acceptor passes its own blob
  // here (its resources are created once it knows the peer); the connector gave its blob up front.
  void confirm(std::vector<uint8_t> acceptorBlob = {});
  const Hello& peer() const { return peer_; }
  const std::string& peerName() const { return peerName_; }
  Fd takeFd() { return std::move(fd_); }
  int fd() const { return fd_.get(); }

 private:
  Status pump();  // write pending bytes, read into the frame buffer
  Status onFrame(FrameType type, std::span<const uint8_t> payload);
  Status fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  Fd fd_;
  Role role_;
  std::string peerName_;
  Hello local_;
  Hello peer_;
  bool eof_ = false, helloReceived_ = false, confirmed_ = false, helloSent_ = false, readyDone_ = false;
  std::vector<uint8_t> out_;
  size_t outOff_ = 0;
  std::vector<uint8_t> in_;
  std::chrono::steady_clock::time_point lastProgress_;
};

// After the handshake: watches the control socket. Cheap to call often (rate-limited poll).
class ControlChannel {
 public:
  ControlChannel() = default;
  ControlChannel(Fd fd, std::string peerName) : fd_(std::move(fd)), peerName_(std::move(peerName)) {}
  // Ok while the peer's process and the link are alive; RemoteError (logged once) otherwise.
  Status checkAlive();
  // Tells the peer why this side gave up on the connection (a short text; best effort, never blocks) and closes
  // our sending half, so that the peer's checkAlive() fails at once with that reason instead of waiting for a
  // fault it cannot see (e.g. a verbs sender whose packets are lost while the receiver has nothing in flight).
  void notifyFailure(const std::string& why);
  // Why checkAlive() declared the peer gone ("" while it is alive).
  const std::string& deadReason() const { return deadReason_; }
  const std::string& peerName() const { return peerName_; }

 private:
  Fd fd_;
  std::string peerName_;
  bool dead_ = false;
  bool notified_ = false;
  std::string deadReason_;
  std::chrono::steady_clock::time_point lastPoll_{};
};

// Telemetry identity of a connection to the peer that sent this HELLO (both transports use it).
NetCommInfo netCommInfo(const Hello& peer, uint64_t commId, bool isSend);

// Local identity for HELLO: host name, pid, our rank for commId if known, a fresh nonce.
Hello makeLocalHello(uint8_t transport, uint64_t commId, std::vector<uint8_t> blob);

}  // namespace icn
