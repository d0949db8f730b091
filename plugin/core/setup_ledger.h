// The sockets of one listener's unfinished connection set-ups, wherever they wait: handshakes the listener runs
// (before their peer's proof, or proven and waiting for room in the transport) and connections a transport
// finishes after the proof (a TCP connection with its lanes, a UCX or verbs connection waiting for READY). They
// share one budget (ICN_LISTEN_MAX_SETUPS connections' worth of sockets). A set-up that takes the budget past
// its end makes the peer address holding the most sockets give up its oldest set-up: a flood from one address
// evicts its own entries before those of any other address, and its newest entries (an honest peer's, when it
// shares the flood's address) last.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace icn {

class SetupLedger {
  struct State;

 public:
  // A set-up's place in the ledger: its peer's address, its sockets and its age. Given back when destroyed.
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // Run when the ledger takes the place back: closes the set-up's sockets at once; its owner drops the rest at
    // its next look (evicted() is then true). Replaces the previous one (a set-up handed to another owner).
    void onEvict(std::function<void()> closeNow) { onEvict_ = std::move(closeNow); }
    bool evicted() const { return evicted_; }
    // The peer as later logs name it (after its proof: host:pid (address:port)).
    void rename(std::string name) { name_ = std::move(name); }
    const std::string& name() const { return name_; }
    const std::string& address() const { return address_; }
    int sockets() const { return sockets_; }
    // A TCP connection takes over the socket of each lane matched to it (the lane's own slot is given back).
    void addSocket();

   private:
    friend class SetupLedger;
    Slot() = default;
    std::shared_ptr<State> ledger_;
    std::string address_, name_;
    uint64_t seq_ = 0;  // admission order: lower is older
    int sockets_ = 0;
    bool evicted_ = false;
    std::function<void()> onEvict_;
  };

  // `listener` names the listener in WARNs; `connections` is the cap, `socketsPerConnection` what one connection
  // of the transport holds while it is set up.
  SetupLedger(std::string listener, size_t connections, size_t socketsPerConnection);
  ~SetupLedger();

  // A new set-up of one socket from `address` (no port), named `name`. When the budget is then exceeded, set-ups
  // are evicted until it holds again, possibly this one (the caller checks evicted()).
  std::unique_ptr<Slot> admit(const std::string& address, std::string name);
  // Evicts, among the slots `eligible` accepts, the oldest of the address holding the most sockets (WARN once per
  // address, ending in `why`). False when none is eligible.
  bool evictOne(const std::function<bool(const Slot&)>& eligible, const char* why);

  size_t sockets() const;
  size_t budget() const;
  size_t evictions() const;

 private:
  std::shared_ptr<State> state_;
};

// The peer address of "1.2.3.4:port" / "[v6%if]:port", without the port.
std::string addressWithoutPort(const std::string& addressAndPort);

}  // namespace icn
