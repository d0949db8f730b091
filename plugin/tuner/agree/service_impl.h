// The agreement service's inside (agree/service.h): its connections, its per-communicator entries and the service
// itself, shared by service.cc (the loop, leader and follower sides) and registry.cc (the network
// rendezvous). Not an interface: nothing else includes it.
#pragma once
#include <poll.h>
#include <sys/eventfd.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/socket.h"
#include "tuner/agree/agreement.h"
#include "tuner/agree/wire.h"

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
  std::string source;    // accepted connections: the peer's address without its port (flood accounting)
  Clock::time_point born{};
  std::string in, out;
  State state;
  Nonce nl{}, nf{};
  Clock::time_point deadline;
  Entry* entry = nullptr;
  bool dead = false, bye = false;
  // Leader side: the follower's id in the agreement and what it sent so far (the protocol's order).
  int member = 0;
  bool membersSeen = false, dropSeen = false;
  std::array<std::array<bool, coll::kNumBuckets>, coll::kNumColls> reported{};
  std::vector<int> ranks;  // leader side: the ranks its MEMBERS claimed
  // Leader side: the diagnosis message being reassembled, the kind it is, per kind the window its messages are
  // counted in and their count, and the process (host, pid) its hang reports speak for (fixed by the first).
  std::string diagIn;
  uint8_t diagKind = 0;
  std::array<Clock::time_point, 3> diagWindow{};
  std::array<int, 3> diagCount{};
  std::string reportOf;
  bool diagWarned = false;
};

struct Entry {
  std::shared_ptr<Agreement> a;
  Token token{};
  std::string file;      // the rendezvous file
  std::string fileText;  // leader: what it wrote there (re-read until START: another text means another leader)
  Clock::time_point nextFileCheck{};
  std::vector<std::unique_ptr<Conn>> followers;  // leader: authenticated followers
  std::unique_ptr<Conn> leader;                  // follower: its connection to the leader
  // Network rendezvous (ICN_TUNER_RENDEZVOUS=tcp://...): the leader registers its address until START, a follower
  // looks it up and stays until START (the registry tells it when two processes claim the leader's place).
  bool tcp = false;
  std::unique_ptr<Conn> reg;
  std::string found;  // follower: the leader's address the registry gave
  bool contested = false, contestSent = false;  // follower: the registry says two processes claim rank 0
  Clock::time_point nextReg{};
  bool regWarned = false, regDistrustWarned = false;
  Clock::time_point nextLook{};
  bool membersSent = false, freezeSent = false, warnedStale = false;
  // Follower: the ranks its MEMBERS named (the only ones the leader takes diagnosis for), and the diagnosis's last
  // straggler period and hang report sent to the leader.
  std::vector<int> membersRanks;
  uint64_t diagPeriodSent = 0, diagReportSent = 0;
  bool diagTooBigWarned = false;
};

class Service {
 public:
  bool attach(const std::shared_ptr<Agreement>& a, int nNodes, std::string* why);
  void detach(const Agreement* a);

 private:
  // Where the communicator's processes meet: the network registry (*tcp) or the directory *dir. False, with *why,
  // when it cannot be used. lifeMu_ held.
  bool chooseRendezvous(int nNodes, bool* tcp, std::string* dir, std::string* why);
  // Leader: listens, and writes its rendezvous file (the directory form; the network form registers later).
  bool publishLeader(Entry& e, std::string* why);
  void loop();
  // Every socket the thread waits on; returns how long poll may wait when none is ready, in ms: a short tick while
  // an agreement tunes (calls wait on its horizons), a long one when every agreement only gathers the diagnosis.
  int pollSet(std::vector<pollfd>& fds) const;
  // One round after poll: wake-ups, new connections, every connection's input and deadlines, every entry's step.
  void serveAll(const std::unordered_map<int, short>& events);
  void serveConn(Conn& c, short ev, Clock::time_point now);  // `ev`: what poll saw on it
  void adoptProven();  // proven connections leave pending_: to their leader entry, or the registry's clients
  void step(Entry& e);
  void stepLeader(Entry& e);               // announcements and the stop out to every follower
  void stepFollower(Entry& e, Conn& c);    // ranks, reports and a drop to the leader at `c`
  void sendMembers(Entry& e, Conn& c);
  void readConn(Conn& c);
  void handle(Conn& c, uint8_t type, Reader& r);  // by the connection's state and kind:
  void onHello(Conn& c, uint8_t type, Reader& r);      // leader or registry: a follower or client proves the secret
  void onChallenge(Conn& c, uint8_t type, Reader& r);  // follower or client: the other side's nonce
  void onWelcome(Conn& c, uint8_t type, Reader& r);    // follower or client: the other side's proof
  void fromRegistry(Conn& c, uint8_t type, Reader& r);  // registry client, after the handshake
  void fromFollower(Conn& c, uint8_t type, Reader& r);  // leader side, after the handshake
  void onMembers(Conn& c, Reader& r);  // a follower's ranks (once, before any REPORT)
  void onReport(Conn& c, Reader& r);   // its measurements of one bucket (once per bucket)
  void onDrop(Conn& c, Reader& r);     // it gave up waiting (once)
  // The diagnosis's gathering (agree/gather.cc): a follower sends each new straggler period's summaries of this
  // communicator and each new hang report; the leader checks them and hands them to the process's diagnoser.
  void sendDiagnosis(Entry& e, Conn& c);
  void sendDiagText(Conn& c, uint8_t kind, const std::string& text);
  void onDiag(Conn& c, Reader& r);
  void takeDiagSummaries(Conn& c, const std::string& text);
  void takeDiagReport(Conn& c, const std::string& text);
  void fromLeader(Conn& c, uint8_t type, Reader& r);    // follower side, after the handshake
  // Leader: a follower that proved the secret becomes a member (a late one gets what was announced so far).
  void join(Conn& c);
  // Leader: follower `c` lied: WARN naming it and what it said, stop the agreement, and drop it (`drop`: its
  // stream is worthless; a rank claimed twice keeps both claimants, one of whom may be honest).
  void lie(Conn& c, const std::string& what, bool drop = true);
  // Leader: every announcement so far, as a late follower needs them.
  void sendHistory(Conn& c, const Agreement& a);
  // Leader (directory rendezvous): its file still names it, else another process claims rank 0.
  void checkFile(Entry& e);
  void send(Conn& c, uint8_t type, const std::string& payload);
  void flush(Conn& c);
  void fail(Conn& c, const char* what);
  void lookForLeader(Entry& e);
  // Follower (directory rendezvous): the leader's address from its file, and the secret into e.token; false while
  // there is none (or it is still being written).
  bool readRendezvousFile(Entry& e, std::string* addr, SockAddr* sa);
  void connectLeader(Entry& e, const std::string& addr, const SockAddr& sa);
  void acceptAll(Fd& listener, Conn::Kind kind);
  // Room for one more unproven connection from `source` (evicting the oldest one past kFloodGrace where a bound is
  // reached); false: refuse the newcomer.
  bool makeRoom(const std::string& source, Clock::time_point now);
  void noteFlood(const std::string& source, Clock::time_point now);
  void reportFlood(Clock::time_point now);
  // The registry (ICN_TUNER_RENDEZVOUS=tcp://host:port): its address, serving it where this host owns it, a
  // registry client's steps and the registry's side of a client.
  bool resolveRegistry(const std::string& spec, std::string* why);  // lifeMu_ held (resolving may take a while)
  void serveRegistry();
  void stepRegistryClient(Entry& e);
  void handleRegistry(Conn& c, uint8_t type, Reader& r);
  void registerLeader(Conn& c, Reader& r);  // REGISTER: a leader's address (a second one contests it)
  void lookUpLeader(Conn& c, Reader& r);    // LOOKUP: a follower waits for its leader's address
  // The registry's other proven clients of `c`'s communicator, and the leader address one of them registered.
  std::vector<Conn*> sameCommClients(const Conn& c);
  std::string registeredLeader(const Conn& c);
  void tellContested(Conn& o, const std::string& first, const std::string& second);
  void regFailed(Entry& e, Conn& c, const char* what);
  // A registry client told that two processes claim rank 0 of its communicator (`a`, `b`: their addresses).
  void contested(Entry& e, const std::string& a, const std::string& b);
  bool isContested(uint64_t commId, int nRanks) const;
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
  std::deque<std::pair<uint64_t, int>> contested_;  // the registry: communicators two processes registered for
  // Unproven connections dropped or refused since the last WARN, per source address (at most 16 named).
  std::map<std::string, uint64_t> flood_;
  uint64_t floodOthers_ = 0;
  Clock::time_point floodFirst_{}, floodNext_{};
  std::thread thread_;
  bool stop_ = false;
};

bool isNetworkRendezvous(const std::string& spec);
Service& service();

}  // namespace icn::tuner::agree
