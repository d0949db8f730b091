// The agreement service's inside (agree_service.h): its connections, its per-communicator entries and the service
// itself, shared by agree_service.cc (the loop, leader and follower sides) and agree_registry.cc (the network
// rendezvous). Not an interface: nothing else includes it.
#pragma once
#include <sys/eventfd.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/socket.h"
#include "tuner/agree_wire.h"
#include "tuner/agreement.h"

namespace icn::tuner::agree {

struct Entry;

struct Conn {
  enum class State { Connecting, AwaitChallenge, AwaitWelcome, AwaitHello, Ready };
  // Agree: leader <-> follower. RegClient: this process at the registry (a leader registering, a follower looking
  // up). RegServer: the registry's end of a RegClient connection.
  enum class Kind { Agree, RegClient, RegServer };
  Kind kind = Kind::Agree;
  uint64_t regComm = 0;  // RegServer: the communicator the client proved the registry secret for
  int regRanks = 0;
  std::string regAddr;   // RegServer: the address a leader registered ("" until it did)
  bool lookup = false;   // RegServer: a follower waits for that communicator's leader
  Fd fd;
  std::string peer;
  std::string in, out;
  State state;
  Nonce nl{}, nf{};
  Clock::time_point deadline;
  Entry* entry = nullptr;
  int members = 0;
  bool dead = false, bye = false;
  std::array<std::array<bool, coll::kNumBuckets>, coll::kNumColls> reported{};  // leader: this follower's reports
};

struct Entry {
  std::shared_ptr<Agreement> a;
  Token token{};
  std::string file;  // the leader's rendezvous file
  std::vector<std::unique_ptr<Conn>> followers;  // leader: authenticated followers
  std::unique_ptr<Conn> leader;                  // follower: its connection to the leader
  // Network rendezvous (ICN_TUNER_RENDEZVOUS=tcp://...): the leader registers its address until START, a follower
  // looks it up until it reached the leader.
  bool tcp = false;
  std::unique_ptr<Conn> reg;
  std::string found;  // follower: the leader's address the registry gave
  Clock::time_point nextReg{};
  bool regWarned = false, regDistrustWarned = false;
  Clock::time_point nextLook{};
  bool membersSent = false, freezeSent = false, warnedStale = false;
  // Leader: a START or horizon queued but not yet taken by every follower's socket.
  bool inFlight = false, inFlightStart = false;
  uint64_t flightS = 0, flightH = 0;
  std::vector<AgreedDecision> flightDecisions;
};

class Service {
 public:
  bool attach(const std::shared_ptr<Agreement>& a, int nNodes, std::string* why);
  void detach(const Agreement* a);

 private:
  void loop();
  void step(Entry& e);
  void readConn(Conn& c);
  void handle(Conn& c, uint8_t type, Reader& r);
  void send(Conn& c, uint8_t type, const std::string& payload);
  void flush(Conn& c);
  void fail(Conn& c, const char* what);
  void lookForLeader(Entry& e);
  void acceptAll(Fd& listener, Conn::Kind kind);
  // The registry (ICN_TUNER_RENDEZVOUS=tcp://host:port): its address, serving it where this host owns it, a
  // registry client's steps and the registry's side of a client.
  bool resolveRegistry(const std::string& spec, std::string* why);  // lifeMu_ held (resolving may take a while)
  void serveRegistry();
  void stepRegistryClient(Entry& e);
  void handleRegistry(Conn& c, uint8_t type, Reader& r);
  void regFailed(Entry& e, Conn& c, const char* what);
  Entry* find(uint64_t commId, int nRanks, Agreement::Role role);
  void wake() {
    uint64_t one = 1;
    if (wakeFd_.valid()) (void)!write(wakeFd_.get(), &one, sizeof one);
  }

  std::mutex lifeMu_;  // attach/detach, thread start and stop
  std::mutex mu_;      // everything below, held by the thread while it works
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::unique_ptr<Conn>> pending_;
  Fd listener_, wakeFd_;
  std::string listenAddr_;
  std::string registrySpec_;  // the tcp:// value registryAddr_ was resolved from
  SockAddr registryAddr_;
  Fd registry_;               // this process serves the registry
  std::vector<std::unique_ptr<Conn>> regConns_;  // the registry's authenticated clients
  std::thread thread_;
  bool stop_ = false;
};

bool isNetworkRendezvous(const std::string& spec);
Service& service();

}  // namespace icn::tuner::agree
