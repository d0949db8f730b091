// The agreement's network rendezvous (ICN_TUNER_RENDEZVOUS=tcp://host:port, agree/service.h): where the registry
// is, serving it on the host that owns its address, a registry client's steps, and the registry's side of a client.
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/log.h"
#include "tuner/agree/service_impl.h"

namespace icn::tuner::agree {

namespace {

std::string unbracket(const std::string& host) {
  return host.size() >= 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
}

// "tcp://host:port" into its host and port; an empty host is the job's main host as launchers name it:
// MASTER_ADDR (torchrun), else the host of NCCL_COMM_ID.
bool splitRegistrySpec(const std::string& spec, std::string* host, std::string* port, std::string* why) {
  std::string rest = spec.substr(6);
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon + 1 >= rest.size()) {
    if (why) *why = "ICN_TUNER_RENDEZVOUS=" + spec + " is not tcp://host:port";
    return false;
  }
  *host = unbracket(rest.substr(0, colon));
  *port = rest.substr(colon + 1);
  if (host->empty()) {
    const char* m = getenv("MASTER_ADDR");
    const char* id = getenv("NCCL_COMM_ID");
    if (m && *m) {
      *host = m;
    } else if (id && *id) {
      std::string h = id;
      size_t c = h.rfind(':');
      *host = c == std::string::npos ? "" : unbracket(h.substr(0, c));
    }
    if (host->empty()) {
      if (why) *why = "ICN_TUNER_RENDEZVOUS=" + spec + " names no host and neither MASTER_ADDR nor NCCL_COMM_ID is set";
      return false;
    }
  }
  char* end = nullptr;
  long p = strtol(port->c_str(), &end, 10);
  if (*end != '\0' || p < 1 || p > 65535) {
    if (why) *why = "ICN_TUNER_RENDEZVOUS=" + spec + ": the port must be 1..65535";
    return false;
  }
  return true;
}

}  // namespace

bool Service::resolveRegistry(const std::string& spec, std::string* why) {
  if (spec == registrySpec_) return true;
  std::string host, port;
  if (!splitRegistrySpec(spec, &host, &port, why)) return false;
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) {
    if (why) *why = "ICN_TUNER_RENDEZVOUS=" + spec + ": cannot resolve " + host + ": " + gai_strerror(rc);
    return false;
  }
  // The first IPv4 answer where there is one (a host name often maps to both).
  const addrinfo* pick = res;
  for (const addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) {
      pick = r;
      break;
    }
  SockAddr addr{};
  memcpy(&addr.storage, pick->ai_addr, pick->ai_addrlen);
  addr.len = pick->ai_addrlen;
  freeaddrinfo(res);
  std::lock_guard<std::mutex> lock(mu_);  // the service thread reads the address
  registryAddr_ = addr;
  registrySpec_ = spec;
  return true;
}

void Service::serveRegistry() {
  if (registry_.valid() || registryAddr_.len == 0) return;
  // Only the host owning the registry's address serves it: binding that address succeeds there alone. The
  // registry then listens on every interface, since the name may resolve to another local address here (a
  // loopback alias in /etc/hosts) than elsewhere. Whoever binds first serves; the others are its clients.
  SockAddr probe = registryAddr_;
  uint16_t port;
  if (probe.family() == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&probe.storage);
    port = in->sin_port;
    in->sin_port = 0;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&probe.storage);
    port = in6->sin6_port;
    in6->sin6_port = 0;
  }
  Fd p(socket(probe.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!p.valid() || bind(p.get(), probe.sa(), probe.len) != 0) return;
  p.reset();
  SockAddr any{};
  if (probe.family() == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&any.storage);
    in->sin_family = AF_INET;
    in->sin_port = port;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    any.len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&any.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = port;
    in6->sin6_addr = in6addr_any;
    any.len = sizeof(sockaddr_in6);
  }
  Fd fd(socket(any.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int one = 1;
  if (!fd.valid() || setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd.get(), any.sa(), any.len) != 0 || listen(fd.get(), 1024) != 0)
    return;  // another process of this host serves it (or something else holds the port: the handshake tells)
  registry_ = std::move(fd);
  ICN_INFO(subsys::Tuning, "tuner: this process serves the agreement registry at %s (port %u on every interface)",
           registryAddr_.str().c_str(), static_cast<unsigned>(ntohs(port)));
}

void Service::stepRegistryClient(Entry& e) {
  Agreement& a = *e.a;
  // A leader stays registered until START (every follower found it by then); a follower stays until START too, so
  // that the registry can tell it when a second process claims the leader's place. Every attempt is bounded
  // (connect and handshake deadlines) and the agreement's own waits bound how long anyone cares.
  bool want = !a.frozen() && !e.contested && a.start() == Agreement::kNever &&
              (a.role() == Agreement::Role::Leader ? !a.inFlight() : true);
  if (e.reg && (e.reg->dead || !want)) e.reg.reset();
  if (!want || e.reg || Clock::now() < e.nextReg) return;
  serveRegistry();  // the process that served it may have left: whoever binds next takes over
  auto c = std::make_unique<Conn>();
  c->kind = Conn::Kind::RegClient;
  c->entry = &e;
  c->peer = registryAddr_.str();
  if (startConnect(registryAddr_, &c->fd) != Status::Ok) {
    e.nextReg = Clock::now() + kRegistryRetry;
    return;
  }
  c->state = Conn::State::Connecting;
  c->deadline = Clock::now() + kConnect;
  e.reg = std::move(c);
}

void Service::regFailed(Entry& e, Conn& c, const char* what) {
  e.nextReg = Clock::now() + kRegistryRetry;
  if (!e.regWarned)
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement registry %s: %s; trying again while the agreement waits",
             static_cast<unsigned long long>(e.a->commId()), c.peer.c_str(), what);
  e.regWarned = true;
}

bool Service::isContested(uint64_t commId, int nRanks) const {
  return std::find(contested_.begin(), contested_.end(), std::make_pair(commId, nRanks)) != contested_.end();
}

void Service::contested(Entry& e, const std::string& first, const std::string& second) {
  Agreement& a = *e.a;
  if (e.contested) return;
  e.contested = true;
  e.found.clear();
  std::string why = "the registry reports two processes claiming rank 0 (leaders at " + first + " and " + second + ")";
  ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: %s; %s", static_cast<unsigned long long>(a.commId()), why.c_str(),
           a.role() == Agreement::Role::Leader ? "the agreement stops"
           : e.leader                          ? "telling the leader this process joined"
                                               : "this process joins neither");
  // Only the leader stops the agreement: it alone knows whether START is out. A follower tells its leader; one
  // that has none yet never joins, so no leader can start with it.
  if (a.role() == Agreement::Role::Leader) a.stop(why.c_str());
}

void Service::handleRegistry(Conn& c, uint8_t type, Reader& r) {
  if (type == kRegister) return registerLeader(c, r);
  if (type == kLookup) return lookUpLeader(c, r);
  fail(c, "broke the registry protocol");
}

std::vector<Conn*> Service::sameCommClients(const Conn& c) {
  std::vector<Conn*> out;
  auto same = [&](const Conn& o) {
    return &o != &c && !o.dead && o.state == Conn::State::Ready && o.regComm == c.regComm &&
           o.regRanks == c.regRanks;
  };
  for (auto& o : pending_)
    if (o && o->kind == Conn::Kind::RegServer && same(*o)) out.push_back(o.get());
  for (auto& o : regConns_)
    if (same(*o)) out.push_back(o.get());
  return out;
}

std::string Service::registeredLeader(const Conn& c) {
  std::string addr;
  for (Conn* o : sameCommClients(c))
    if (!o->regAddr.empty()) addr = o->regAddr;
  return addr;
}

void Service::tellContested(Conn& o, const std::string& first, const std::string& second) {
  Writer w;
  putAddr(w, first);
  putAddr(w, second);
  send(o, kContested, w.b);
}

void Service::registerLeader(Conn& c, Reader& r) {
  std::string addr;
  SockAddr sa;
  if (!c.regAddr.empty() || !getAddr(r, &addr, &sa) || !r.done()) return fail(c, "broke the registry protocol");
  if (isContested(c.regComm, c.regRanks)) return tellContested(c, addr, "an earlier claimant");
  std::string held = registeredLeader(c);
  if (!held.empty() && held != addr) {
    // Two processes claim rank 0 of one communicator; the registry cannot tell which one holds it. Neither is
    // given to followers, and everyone of that communicator hears it: its leader stops before START.
    ICN_WARN(subsys::Tuning, "tuner: agreement registry: comm 0x%llx: %s registers leader %s while leader %s is "
             "registered: two processes claim rank 0; neither is given to followers",
             static_cast<unsigned long long>(c.regComm), c.peer.c_str(), addr.c_str(), held.c_str());
    if (contested_.size() >= kMaxContested) contested_.pop_front();
    contested_.emplace_back(c.regComm, c.regRanks);
    tellContested(c, held, addr);
    for (Conn* o : sameCommClients(c)) {
      o->regAddr.clear();
      tellContested(*o, held, addr);
    }
    return;
  }
  c.regAddr = addr;  // the same address again is the same leader, registering after the registry moved
  Writer w;
  putAddr(w, addr);
  for (Conn* o : sameCommClients(c))
    if (o->lookup) send(*o, kFound, w.b);
}

void Service::lookUpLeader(Conn& c, Reader& r) {
  if (!r.done() || c.lookup) return fail(c, "broke the registry protocol");
  c.lookup = true;
  if (isContested(c.regComm, c.regRanks)) return tellContested(c, "an earlier claimant", "another");
  std::string addr = registeredLeader(c);
  if (addr.empty()) return;
  Writer w;
  putAddr(w, addr);
  send(c, kFound, w.b);
}

}  // namespace icn::tuner::agree
