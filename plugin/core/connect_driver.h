// The connect and accept drivers of the transports whose connection is one handshake (ib, ucx): when a transport
// builds its resources for a peer and when the handshake may finish. Nothing exists for a peer before its HELLO
// proved it (PeerKnown); the acceptor answers with its blob at once; the connector confirms once its resources are
// ready, so the acceptor's comm never exists before the connector's side can take traffic. (The TCP transport runs
// one handshake per socket and groups them by token: it drives its own.)
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/handshake.h"
#include "core/oob.h"
#include "core/status.h"

namespace icn {

// A transport's resources for one connection, built around its handshake.
class ConnectionSetup {
 public:
  virtual ~ConnectionSetup() = default;
  // The peer proved itself: build from its blob (a bad blob is the peer's fault: WARN naming it, return an error).
  // The acceptor puts its own blob into *answer; the connector gets nullptr (its blob went out in its HELLO).
  virtual Status onPeerKnown(const Handshake& hs, std::vector<uint8_t>* answer) = 0;
  // Work that must end before the connection carries traffic (UCX wire-up); polled after onPeerKnown.
  virtual Status poll(bool* ready) {
    *ready = true;
    return Status::Ok;
  }
};

// Connect side: one connection's state, parked in NCCL's handle between calls of connect().
template <class S>
struct PendingConnection {
  std::unique_ptr<S> setup;
  std::unique_ptr<OobConnector> oob;  // declared last, closed first: the peer sees the socket go before the rest
  bool peerKnown = false;  // setup->onPeerKnown ran
  bool confirmed = false;  // setup was ready: the handshake may finish
};

// One step of a connector: progress, build at PeerKnown, confirm once ready. *done when the handshake is Done.
Status advanceConnect(OobConnector& oob, ConnectionSetup& setup, bool* peerKnown, bool* confirmed, bool* done);

// One call of NCCL's connect(): takes the state parked in the handle (the first call makes it with start(), which
// builds the setup and returns the blob for our HELLO), drives it, and parks it again until the handshake is Done;
// then *out holds it. On failure the state dies here (closing the socket) and the handle is clean for a retry.
template <class S>
Status driveConnect(HandleBytes handle, uint8_t transport, uint64_t commId,
                    const std::function<Status(std::unique_ptr<S>*, std::vector<uint8_t>*)>& start,
                    std::unique_ptr<PendingConnection<S>>* out) {
  out->reset();
  std::unique_ptr<PendingConnection<S>> pc(takePending<PendingConnection<S>>(handle));
  if (!pc) {
    pc = std::make_unique<PendingConnection<S>>();
    std::vector<uint8_t> blob;
    ICN_CHECK(start(&pc->setup, &blob));
    ICN_CHECK(OobConnector::start(handle, transport, makeLocalHello(transport, commId, std::move(blob)), &pc->oob));
  }
  bool done = false;
  ICN_CHECK(advanceConnect(*pc->oob, *pc->setup, &pc->peerKnown, &pc->confirmed, &done));
  if (!done) {
    parkPending(handle, pc.release());
    return Status::Ok;
  }
  *out = std::move(pc);
  return Status::Ok;
}

// Accept side: the listener's handshakes and the connections past their peer's proof whose set-up is finishing.
// At most maxSetups of those at once (each holds resources); past it, proven peers wait in the listener.
template <class S>
class AcceptDriver {
 public:
  AcceptDriver(std::unique_ptr<OobListener> listener, size_t maxSetups)
      : listener_(std::move(listener)), maxSetups_(maxSetups) {}

  // Accepts and progresses every connection; hands one back when its handshake is Done and its setup ready.
  // make() builds the resources for a proven peer; its failure is ours (returned), a peer's failure drops only
  // that connection (logged with the peer's name) and the others go on.
  Status poll(const std::function<Status(std::unique_ptr<S>*)>& make, std::unique_ptr<Handshake>* hsOut,
              std::unique_ptr<S>* setupOut) {
    hsOut->reset();
    setupOut->reset();
    std::unique_ptr<Handshake> hs;
    ICN_CHECK(listener_->poll(setups_.size() < maxSetups_ ? &hs : nullptr));
    if (hs) {
      std::unique_ptr<S> s;
      ICN_CHECK(make(&s));
      std::vector<uint8_t> answer;
      if (s->onPeerKnown(*hs, &answer) == Status::Ok) {
        hs->confirm(std::move(answer));
        setups_.emplace_back(std::move(hs), std::move(s));
      }
    }
    for (size_t i = 0; i < setups_.size(); i++) {
      auto& [h, s] = setups_[i];
      Handshake::Phase phase;
      bool ready = false;
      if (s->poll(&ready) != Status::Ok || h->progress(&phase) != Status::Ok) {
        setups_.erase(setups_.begin() + static_cast<long>(i--));
        continue;
      }
      if (phase != Handshake::Phase::Done || !ready) continue;
      *hsOut = std::move(h);
      *setupOut = std::move(s);
      setups_.erase(setups_.begin() + static_cast<long>(i));
      return Status::Ok;
    }
    return Status::Ok;
  }
  uint64_t commId() const { return listener_->commId(); }

 private:
  std::unique_ptr<OobListener> listener_;
  size_t maxSetups_;
  std::vector<std::pair<std::unique_ptr<Handshake>, std::unique_ptr<S>>> setups_;
};

}  // namespace icn
