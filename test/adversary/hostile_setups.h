// Hostile peers against connection set-up: floods of connections that pass their proof and then stall (they test a
// listener's budget of unfinished set-ups), and a listener that answers a victim's connect correctly and then sends
// what the protocol forbids (it tests the victim's own connect). Every connection is announced like WirePeer's.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/transport.h"
#include "hostile_peer.h"

namespace icn::adversary {

// Raises this process's descriptor limit to its hard limit (a flood holds over a thousand sockets).
void raiseDescriptorLimit();

// `count` connections to a listener of communicator `commId`, each answering its CHALLENGE with a correct HELLO (tagged with `key`; a distinct
// acceptableBlob() each: a TCP control request for lane 0, a UCX worker address) and then silent: no READY, no lane.
// Pipelined a batch at a time (over TCP each batch waits for the listener's answers). Connections the listener
// closed along the way stay in the list.
std::vector<std::unique_ptr<WirePeer>> provenIdleFlood(const SockAddr& to, uint64_t commId, size_t count,
                                                       const std::string& key);

// ICN TCP connections that prove their control handshake, wait for the answer, prove all 1 + `lanes` lane
// handshakes and never send READY on any of them: each holds every socket of a connection at the victim.
std::vector<std::unique_ptr<WirePeer>> unfinishedTcpFlood(const SockAddr& to, uint64_t commId, size_t connections,
                                                          int lanes, const std::string& key);

// Plays ICN's acceptor for one victim connect: it answers the victim's HELLO correctly (it learns the communicator
// id from that HELLO; `key` tags the answer) with a transport answer the victim accepts (TCP: lane 0 only; UCX: a
// real worker that is never progressed), accepts the victim's further connections (TCP lanes) and never speaks
// on them.
class HostileListener {
 public:
  HostileListener();  // listens on the interface ICN would pick; ok() tells whether it worked
  bool ok() const { return fd_.valid(); }
  // The listen handle of the transport under test that names this listener.
  std::array<uint8_t, kHandleSize> handle() const;
  // Accepts the victim's control connection (within `limit`), challenges it, reads its HELLO and answers it,
  // followed in the same write by `extra`. False, with *why, when the victim did not get that far.
  bool answer(const std::string& key, std::span<const uint8_t> extra, Ms limit, std::string* why);
  // Writes 1 MiB at a time on the control connection (and takes further connections) until stop() says so, the
  // victim closes it, or `most` bytes are out. Returns the bytes written.
  size_t stream(size_t most, const std::function<bool()>& stop);
  // Takes further connections (never answered) until stop() says so.
  void holdConnections(const std::function<bool()>& stop);

 private:
  void acceptMore();
  Fd fd_;
  SockAddr addr_;
  Fd control_;
  std::vector<Fd> held_;
};

}  // namespace icn::adversary
