// The connect and accept drivers of the transports whose connection is one handshake (ib, ucx): when a transport
// builds its resources for a peer and when the handshake may finish. Nothing exists for a peer before its HELLO
// proved it (PeerKnown); the acceptor answers with its blob at once; the connector confirms once its resources are
// ready, so the acceptor's comm never exists before the connector's side can take traffic. (The TCP transport runs
// one handshake per socket and groups them by token: it drives its own.)
#pragma once
#include <algorithm>
#include <chrono>
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

// The handshake's deadline ends with its READY; a transport set-up that is still not ready ICN_CONNECT_TIMEOUT_MS
// after its peer proved itself (a peer that left mid wire-up) is dropped with a WARN naming the peer.
bool setupOverdue(const Handshake& hs, std::chrono::steady_clock::time_point taken);

// How long a connection holds its transport resources before it may be evicted for a proven peer that waits for
// room: an honest peer's set-up (endpoint wire-up, QP transitions, READY) takes a few round trips; a peer that
// proved itself and then went silent holds them no longer than this while others wait.
constexpr std::chrono::milliseconds kSetupHoldBeforeEviction{250};

// Accept side: the listener's handshakes and the connections past their peer's proof whose set-up is finishing.
// At most maxSetups of those at once (each holds resources); past it, proven peers wait in the listener (newest
// served first), and one that waits evicts the oldest set-up, of the address holding the most sockets, that has
// held its resources for kSetupHoldBeforeEviction. All of them count in the listener's set-up budget.
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
    sweep();
    std::vector<AcceptedHandshake> proven;
    ICN_CHECK(listener_->poll(maxSetups_ - std::min(maxSetups_, setups_.size()), &proven));
    sweep();  // what the listener's accepts evicted
    for (auto& a : proven) ICN_CHECK(take(make, std::move(a)));
    if (setups_.size() >= maxSetups_ && listener_->provenWaiting() > 0) evictStale();
    for (size_t i = 0; i < setups_.size(); i++) {
      Item& it = *setups_[i];
      Handshake::Phase phase;
      bool ready = false;
      if (!it.hs || it.setup->poll(&ready) != Status::Ok || it.hs->progress(&phase) != Status::Ok) {
        setups_.erase(setups_.begin() + static_cast<long>(i--));
        continue;
      }
      if (phase == Handshake::Phase::Done && !ready && setupOverdue(*it.hs, it.taken)) {
        setups_.erase(setups_.begin() + static_cast<long>(i--));
        continue;
      }
      if (phase != Handshake::Phase::Done || !ready) continue;
      *hsOut = std::move(it.hs);
      *setupOut = std::move(it.setup);
      setups_.erase(setups_.begin() + static_cast<long>(i));
      return Status::Ok;
    }
    return Status::Ok;
  }
  uint64_t commId() const { return listener_->commId(); }

 private:
  struct Item {
    std::unique_ptr<SetupLedger::Slot> slot;
    std::unique_ptr<S> setup;
    std::unique_ptr<Handshake> hs;  // null once evicted
    std::chrono::steady_clock::time_point taken;
  };

  Status take(const std::function<Status(std::unique_ptr<S>*)>& make, AcceptedHandshake a) {
    auto it = std::make_unique<Item>();
    ICN_CHECK(make(&it->setup));
    std::vector<uint8_t> answer;
    if (it->setup->onPeerKnown(*a.hs, &answer) != Status::Ok) return Status::Ok;  // logged; the peer is dropped
    a.hs->confirm(std::move(answer));
    it->hs = std::move(a.hs);
    it->slot = std::move(a.slot);
    it->taken = std::chrono::steady_clock::now();
    Item* raw = it.get();
    it->slot->onEvict([raw] {  // closes the socket and releases the transport's resources now
      raw->hs.reset();
      raw->setup.reset();
    });
    setups_.push_back(std::move(it));
    return Status::Ok;
  }
  void sweep() {
    setups_.erase(std::remove_if(setups_.begin(), setups_.end(), [](const auto& it) { return !it->hs; }),
                  setups_.end());
  }
  void evictStale() {
    const auto now = std::chrono::steady_clock::now();
    auto stale = [&](const SetupLedger::Slot& s) {
      for (auto& it : setups_)
        if (it->hs && it->slot.get() == &s) return now - it->taken >= kSetupHoldBeforeEviction;
      return false;
    };
    listener_->ledger().evictOne(stale, "a proven peer waits for one of the transport's set-up slots, all taken");
    sweep();
  }

  std::unique_ptr<OobListener> listener_;
  size_t maxSetups_;
  std::vector<std::unique_ptr<Item>> setups_;
};

}  // namespace icn
