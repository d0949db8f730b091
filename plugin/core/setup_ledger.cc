#include "core/setup_ledger.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/log.h"

namespace icn {

struct SetupLedger::State {
  std::string listener;
  size_t connections = 0, budget = 0, total = 0, evictions = 0;
  uint64_t nextSeq = 0;
  std::vector<Slot*> slots;  // admission order, oldest first
  std::unordered_map<std::string, size_t> byAddress;
  std::unordered_set<std::string> warned;  // address and reason of each eviction logged

  void count(const std::string& address, long n) {
    total = size_t(long(total) + n);
    size_t& a = byAddress[address];
    a = size_t(long(a) + n);
    if (a == 0) byAddress.erase(address);
  }
  void remove(Slot* s) {
    auto it = std::find(slots.begin(), slots.end(), s);
    if (it == slots.end()) return;
    slots.erase(it);
    count(s->address_, -long(s->sockets_));
  }
};

std::string addressWithoutPort(const std::string& s) {
  const size_t colon = s.rfind(':');
  std::string a = colon == std::string::npos ? s : s.substr(0, colon);
  if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  return a;
}

SetupLedger::Slot::~Slot() {
  if (!evicted_ && ledger_) ledger_->remove(this);
}

void SetupLedger::Slot::addSocket() {
  if (evicted_ || !ledger_) return;
  sockets_++;
  ledger_->count(address_, 1);
}

SetupLedger::SetupLedger(std::string listener, size_t connections, size_t socketsPerConnection)
    : state_(std::make_shared<State>()) {
  state_->listener = std::move(listener);
  state_->connections = std::max<size_t>(connections, 1);
  state_->budget = state_->connections * std::max<size_t>(socketsPerConnection, 1);
}

SetupLedger::~SetupLedger() {
  // Slots that outlive their ledger (an owner destroyed later) must not count into a ledger nobody reads.
  for (Slot* s : state_->slots) s->ledger_.reset();
}

std::unique_ptr<SetupLedger::Slot> SetupLedger::admit(const std::string& address, std::string name) {
  std::unique_ptr<Slot> s(new Slot());
  s->ledger_ = state_;
  s->address_ = address;
  s->name_ = std::move(name);
  s->seq_ = state_->nextSeq++;
  s->sockets_ = 1;
  state_->slots.push_back(s.get());
  state_->count(address, 1);
  while (state_->total > state_->budget) {
    const std::string why = "set-ups would hold " + std::to_string(state_->total) + " sockets, over the " +
                            std::to_string(state_->budget) + " that ICN_LISTEN_MAX_SETUPS=" +
                            std::to_string(state_->connections) + " connections allow";
    if (!evictOne([](const Slot&) { return true; }, why.c_str())) break;
  }
  return s;
}

bool SetupLedger::evictOne(const std::function<bool(const Slot&)>& eligible, const char* why) {
  State& st = *state_;
  Slot* victim = nullptr;
  size_t most = 0;
  for (Slot* s : st.slots) {  // oldest first: a later slot of the same address never replaces an earlier one
    if (!eligible(*s)) continue;
    const size_t held = st.byAddress[s->address_];
    if (!victim || held > most) victim = s, most = held;
  }
  if (!victim) return false;
  st.remove(victim);
  victim->evicted_ = true;
  st.evictions++;
  if (st.warned.insert(victim->address_ + '|' + why).second)
    ICN_WARN(subsys::Net, "listener %s: %s: dropping the oldest set-up of %s, the address holding the most (%zu "
             "sockets): %s (logged once per address and reason)",
             st.listener.c_str(), why, victim->address_.c_str(), most, victim->name_.c_str());
  std::function<void()> closeNow = std::move(victim->onEvict_);
  if (closeNow) closeNow();
  return true;
}

size_t SetupLedger::sockets() const { return state_->total; }
size_t SetupLedger::budget() const { return state_->budget; }
size_t SetupLedger::evictions() const { return state_->evictions; }

}  // namespace icn
