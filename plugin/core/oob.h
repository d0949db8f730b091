// Out-of-band connection plumbing shared by transports: the listen handle that travels in NCCL's
// 128-byte handle, a listener that runs many handshakes at once (a bad or stalled peer never blocks
// the good ones), and the connect-side state machine.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/handshake.h"
#include "core/setup_ledger.h"
#include "core/socket.h"
#include "core/transport.h"

namespace icn {

constexpr uint8_t kTransportUcx = 1;
constexpr uint8_t kTransportIb = 2;
constexpr uint8_t kTransportTcp = 3;
constexpr size_t kHandleScratchOffset = 64;  // bytes [64,128) of the handle: connect-side state

// Bytes [0,64) of the handle: what the listener advertises.
Status writeListenHandle(HandleBytes handle, uint8_t transport, const SockAddr& addr);
Status readListenHandle(HandleBytes handle, uint8_t transport, SockAddr* addr, std::string* why);

// The connect side keeps one pointer to its pending state in the handle (NCCL calls connect again
// with the same buffer until it returns a comm). The pointer is only trusted if we parked it: a
// garbage or recycled handle can never make us dereference an arbitrary address.
namespace pending_registry {
void add(const void* p);
bool remove(const void* p);  // true when p was registered
}  // namespace pending_registry

// Takes ownership of the state parked in the handle (nullptr when there is none).
template <typename T>
T* takePending(HandleBytes handle) {
  T* p;
  memcpy(&p, handle.data() + kHandleScratchOffset, sizeof p);
  memset(handle.data() + kHandleScratchOffset, 0, sizeof p);
  return p && pending_registry::remove(p) ? p : nullptr;
}
template <typename T>
void parkPending(HandleBytes handle, T* p) {
  pending_registry::add(p);
  memcpy(handle.data() + kHandleScratchOffset, &p, sizeof p);
}

// Connections accepted per poll() call, so one call stays short and pending handshakes progress in between.
constexpr int kAcceptsPerPoll = 16;

// ICN_LISTEN_MAX_SETUPS, clamped to its documented range.
size_t maxSetupsPerListener();

// A handshake the listener hands to its transport, with its place in the listener's set-up budget: the transport
// keeps the slot (and sets what its eviction closes) until the connection is finished or dropped.
struct AcceptedHandshake {
  std::unique_ptr<Handshake> hs;
  std::unique_ptr<SetupLedger::Slot> slot;
};

class OobListener {
 public:
  // `socketsPerConnection`: what one connection of the transport holds while it is set up (TCP: its control socket
  // and lanes; 1 elsewhere); the listener's set-ups hold at most ICN_LISTEN_MAX_SETUPS times that.
  // Fails (InvalidArgument, logged) when the job key is unusable (auth::init).
  static Status open(uint8_t transport, uint64_t commId, size_t socketsPerConnection, HandleBytes handle,
                     std::unique_ptr<OobListener>* out);
  // A listener on a given local address (port chosen by the kernel), advertised by the caller itself.
  static Status openAt(uint8_t transport, uint64_t commId, size_t socketsPerConnection, const SockAddr& addr,
                       std::unique_ptr<OobListener>* out);
  // Accepts new sockets (each counted in the ledger, which evicts when the budget is spent) and progresses every
  // pending handshake. Those that reached PeerKnown (their peer is live and, with a key, proved it) are handed to
  // the caller through `ready`, at most `room` of them, newest first (a flood's older entries wait, and go first
  // when the budget is spent); the caller sets up, confirm()s and progresses them to Done. The others wait, their
  // deadline running. Never fails because of a peer: that handshake is logged and dropped. Running out of
  // descriptors (EMFILE/ENFILE) is temporary: one WARN, and the connection waits in the kernel's queue.
  Status poll(size_t room, std::vector<AcceptedHandshake>* ready);
  // Listens on one more address (port chosen by the kernel; *bound gets it); its connections join the same
  // handshakes, ledger and budget. At most kMaxExtraAddresses.
  static constexpr size_t kMaxExtraAddresses = 8;
  Status addAddress(const SockAddr& addr, SockAddr* bound);
  size_t pendingCount() const { return pending_.size(); }
  // Proven handshakes waiting for the caller's room.
  size_t provenWaiting() const;
  SetupLedger& ledger() { return *ledger_; }
  const SockAddr& address() const { return addr_; }
  uint64_t commId() const { return commId_; }

 private:
  struct Pending {
    std::unique_ptr<Handshake> hs;  // null once evicted
    std::unique_ptr<SetupLedger::Slot> slot;
  };
  Status acceptSome();
  Status acceptSome(int fd, const SockAddr& where);

  Fd fd_;
  SockAddr addr_;
  std::vector<std::pair<Fd, SockAddr>> extra_;  // addAddress's sockets
  uint8_t transport_ = 0;
  uint64_t commId_ = 0;
  std::unique_ptr<SetupLedger> ledger_;
  std::vector<std::unique_ptr<Pending>> pending_;  // oldest first
  bool outOfFds_ = false;  // warned about EMFILE/ENFILE; cleared by the next successful accept
};

class OobConnector {
 public:
  // Fails (InvalidArgument, logged) when the handle is not ours or the job key is unusable (auth::init).
  static Status start(HandleBytes handle, uint8_t transport, Hello hello, std::unique_ptr<OobConnector>* out);
  // Connects to `addr` (an address the listener added) from `source` (bound first; null: the kernel's choice).
  // A probe (a lane offered again over a link that may still be down) logs a failed connect at INFO, not WARN.
  static Status startTo(const SockAddr& addr, const SockAddr* source, Hello hello, std::unique_ptr<OobConnector>* out,
                        bool probe = false);
  // Waits for the TCP connect, then runs the handshake. Phase semantics as Handshake::progress.
  Status progress(Handshake::Phase* phase);
  Handshake& handshake() { return *hs_; }
  const std::string& peerName() const { return peerName_; }
  // Whether the TCP connect completed (the handshake runs or ran).
  bool connected() const { return hs_ != nullptr; }

 private:
  Fd fd_;  // until the TCP connect completes
  std::chrono::steady_clock::time_point started_;
  std::unique_ptr<Handshake> hs_;
  Hello hello_;
  std::string peerName_;
  LogLevel failLevel_ = LogLevel::Warn;  // of a failed TCP connect
};

}  // namespace icn
