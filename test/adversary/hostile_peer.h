// A hostile peer that speaks ICN's wire protocol: raw TCP connections to a listener on which it sends crafted,
// replayed, rewritten, trickled or oversized handshake frames (WirePeer), a UCX peer that completes the
// handshake honestly and then sends UCX messages with any tag bits and sizes (UcxRogue), and a peer of ICN's TCP
// transport that sets up its control and lane sockets honestly and then writes any bytes on lane 0 (TcpRogue).
// Tests run it against a listener that also serves honest ranks. Every connection it opens is announced on
// stderr ("hostile connection from ADDR"), so a test (and the cross-host wrapper) can tell where it came from.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ucp/api/ucp.h>
#include <unistd.h>

#include "core/handshake.h"
#include "core/socket.h"

namespace icn::adversary {

using Ms = std::chrono::milliseconds;
using Nonce = std::array<uint8_t, 16>;

// The transport under test in this process (ICN_TRANSPORT: "tcp", "ib", else ucx), as ICN's handshake numbers it.
uint8_t transportUnderTest();

// The sockets a listener of the transport under test keeps for its unfinished set-ups with ICN_LISTEN_MAX_SETUPS =
// `maxSetups` (TCP: each connection's control socket and 1 + ICN_TCP_STREAMS lanes, kTcpStreams here).
constexpr size_t kSmallSetupCap = 16;
constexpr int kTcpStreams = 4;
size_t setupBudget(size_t maxSetups);
// `env` plus ICN_LISTEN_MAX_SETUPS = kSmallSetupCap and ICN_TCP_STREAMS = kTcpStreams (tests that count sockets).
std::vector<std::pair<std::string, std::string>> withSmallSetupCap(std::vector<std::pair<std::string, std::string>> env);

// The listener address inside a 128-byte listen handle of the transport under test.
SockAddr listenAddress(const void* handle);

// Announces on stderr the local address of a hostile connection (once per address and process).
void announceSource(int fd);
// The source address (no port) of the hostile connections this process opened ("" before the first).
const std::string& hostileSourceAddress();

struct Frame {
  uint16_t type = 0;
  std::vector<uint8_t> payload;
};

class WirePeer {
 public:
  // Connects (blocking, within 5 s); ok() tells whether it worked.
  explicit WirePeer(const SockAddr& to);
  // Over a copy of a connection this process accepted (a hostile listener's).
  explicit WirePeer(const Fd& accepted) : fd_(accepted.valid() ? ::dup(accepted.get()) : -1) {}
  ~WirePeer();
  WirePeer(const WirePeer&) = delete;
  WirePeer& operator=(const WirePeer&) = delete;
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Reads the listener's CHALLENGE frame.
  std::optional<Nonce> readChallenge(Ms limit = Ms(5000));
  std::optional<Frame> readFrame(Ms limit = Ms(5000));
  // Sends everything (false when the listener closed the connection first).
  bool send(std::span<const uint8_t> bytes);
  // Sends one byte every `gap` until all are sent or the listener closes; returns how many bytes went out.
  size_t trickle(std::span<const uint8_t> bytes, Ms gap);
  // True once the listener has closed its end (EOF or reset) within `limit`; data it sent is drained.
  bool closedByListener(Ms limit);
  void close();

 private:
  int fd_ = -1;
  std::vector<uint8_t> in_;
};

// The tag of a handshake message as a peer holding `key` computes it ("" = no key: plain SHA-256).
std::vector<uint8_t> tagWith(const std::string& key, char kind, std::span<const uint8_t> first,
                             std::span<const uint8_t> second);
// A connector HELLO for the transport under test, identity "rogue-peer", tagged for `nonceA` with `key`.
Hello connectorHello(uint64_t commId, std::vector<uint8_t> blob);
void tagConnectorHello(Hello* h, const Nonce& nonceA, const std::string& key);
std::vector<uint8_t> helloFrame(const Hello& h);
// u32 length | bytes: the ucx transport's blob framing around a worker address.
std::vector<uint8_t> ucxBlob(std::span<const uint8_t> workerAddress);
// A well-framed blob of the transport under test that must never be used (refused connections never get as far
// as parsing it), and one that passes the transport's checks (UCX: a real, never progressed worker; TCP: a
// control request for lane 0 only; ib: none, an ib blob names live QPs: see IbRogue).
std::vector<uint8_t> junkBlob();
std::vector<uint8_t> acceptableBlob();

// A UCX peer that passed the handshake (with the key of this process's ICN_AUTH_KEY, if any) and wired up its
// endpoint like an ICN connector, then sends arbitrary tagged messages. Its control connection stays open.
class UcxRogue {
 public:
  static std::unique_ptr<UcxRogue> connect(const SockAddr& to, uint64_t commId, Ms limit, std::string* why);
  ~UcxRogue();
  // Sends `len` bytes with the full 64-bit UCX tag; true when UCX completed the send.
  bool send(const void* data, size_t len, uint64_t tag, Ms limit = Ms(10000));
  // The address of a real UCX worker of this process that is never progressed.
  static std::vector<uint8_t> realWorkerAddress();

 private:
  UcxRogue() = default;
  bool wait(ucs_status_ptr_t req, Ms limit);
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  Fd control_;
};

// A peer of ICN's TCP transport that passed the handshake (control connection, lane 0 and as many helper lanes
// as it asks for and the listener grants; no small eager messages) and then reads clear-to-send records and
// writes arbitrary bytes on any lane.
class TcpRogue {
 public:
  static std::unique_ptr<TcpRogue> connect(const SockAddr& to, uint64_t commId, Ms limit, std::string* why,
                                           int helperLanes = 0);
  int helperLanes() const { return static_cast<int>(helpers_.size()); }
  // The next clear-to-send record's first entry: tag and posted size (nullopt when none came within `limit`).
  struct Cts {
    uint32_t seq = 0;
    uint8_t slot = 0;
    int32_t tag = 0;
    uint32_t size = 0;
  };
  std::optional<Cts> readCts(Ms limit = Ms(10000));
  bool send(std::span<const uint8_t> bytes) { return sendOn(0, bytes); }
  // Sends everything on `lane` (0, or a helper lane from 1); false when the victim took nothing for `limit`.
  bool sendOn(int lane, std::span<const uint8_t> bytes, Ms limit = Ms(5000));
  // Shrinks the kernel's buffer for what arrives on `lane` (a peer that means to stop reading it).
  void shrinkReceiveBuffer(int lane, int bytes);
  // A message header for the receive `cts` names (offset 0, whole message unless overridden by the caller).
  static std::vector<uint8_t> chunkHeader(const Cts& cts, uint32_t total, uint32_t offset, uint32_t length);
  // An eager message (before its clear-to-send record), whole: its tag, the records its sender claims to have
  // read (horizon), its eager number, and its payload.
  static std::vector<uint8_t> eagerMessage(int32_t tag, uint32_t horizon, uint32_t number,
                                           std::span<const uint8_t> payload);
  // Closes every lane and the control connection (as a peer that dies mid-transfer).
  void closeAll();

 private:
  TcpRogue() = default;
  int fdOf(int lane) const { return lane == 0 ? lane0_.get() : helpers_[static_cast<size_t>(lane - 1)].get(); }
  Fd control_, lane0_;
  std::vector<Fd> helpers_;
};

// Memory of a process that a forged descriptor points at: a secret and a completion word, between guards.
struct Canary {
  uint64_t guardBefore[8];
  uint8_t secret[64];
  uint64_t doneWord;
  uint64_t guardAfter[8];
  void arm();
  bool intact() const;  // guards and secret unchanged, doneWord still 0
};

// The descriptor the removed same-host path used to ship: magic, source address, size, completion word, pid.
std::array<uint8_t, 40> forgedDescriptor(uint64_t src, uint64_t size, uint64_t doneWord, int64_t pid);
constexpr uint64_t kOldFastPathTagBit = uint64_t{1} << 62;

}  // namespace icn::adversary
