#include "tuner/agree_service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <net/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/auth.h"
#include "core/log.h"
#include "core/params.h"
#include "core/private_file.h"
#include "core/socket.h"
#include "tuner/agree_service_impl.h"
#include "tuner/agree_wire.h"

namespace icn::tuner::agree {


bool isNetworkRendezvous(const std::string& spec) { return spec.rfind("tcp://", 0) == 0; }

Service& service() {
  static Service* s = new Service();  // never destroyed: detach joins the thread with the last agreement
  return *s;
}

bool Service::attach(const std::shared_ptr<Agreement>& a, int nNodes, std::string* why) {
  std::lock_guard<std::mutex> life(lifeMu_);
  const std::string spec = params::getStringNow(params::Id::TunerRendezvous);
  // Ranks of one node share its runtime directory; only a communicator spanning nodes needs the network form.
  bool tcp = nNodes > 1 && isNetworkRendezvous(spec);
  std::string dir;
  if (tcp) {
    // A network address has no file permissions: the job key is what keeps strangers out, so without it nobody
    // at that address is trusted and the communicator keeps NCCL's choice.
    if (!auth::enabled()) {
      if (why)
        *why = "ICN_TUNER_RENDEZVOUS=" + spec + " needs the job key (ICN_AUTH_KEY or ICN_AUTH_KEY_FILE" +
               (auth::problem().empty() ? "" : ": " + auth::problem()) +
               "): a network rendezvous trusts nobody without it";
      return false;
    }
    if (!resolveRegistry(spec, why)) return false;
  } else {
    dir = rendezvousDir(why);
    if (dir.empty()) return false;
  }
  auto e = std::make_unique<Entry>();
  e->a = a;
  e->tcp = tcp;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!wakeFd_.valid()) wakeFd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!tcp) {
      char name[64];
      snprintf(name, sizeof name, "/agree-%016llx-%d", static_cast<unsigned long long>(a->commId()), a->nRanks());
      e->file = dir + name;
    } else {
      e->token = commToken(a->commId(), a->nRanks());
      serveRegistry();
    }
    if (a->role() == Agreement::Role::Leader) {
      if (!listener_.valid()) {
        SockAddr addr, bound;
        std::string ifname;
        if (pickInterface(&addr, &ifname) != Status::Ok || listenOn(addr, &listener_, &bound) != Status::Ok) {
          if (why) *why = "no address to listen on for the agreement";
          return false;
        }
        listenAddr_ = bound.str();
      }
      if (tcp) {
        ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement leader at %s (registry %s, job key)",
                 static_cast<unsigned long long>(a->commId()), listenAddr_.c_str(), registryAddr_.str().c_str());
      } else {
        auth::fillNonce(std::span<uint8_t, 16>(e->token.data(), 16));
        auth::fillNonce(std::span<uint8_t, 16>(e->token.data() + 16, 16));
        std::string text =
            "icn-agree 1\naddr " + listenAddr_ + "\ntoken " + hex(e->token.data(), e->token.size()) + "\n";
        if (privfile::writeAtomic(e->file, text, false, why) != Status::Ok) return false;
        ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement leader at %s (rendezvous %s)",
                 static_cast<unsigned long long>(a->commId()), listenAddr_.c_str(), e->file.c_str());
      }
    } else if (tcp) {
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement follower, asking the registry %s for the leader",
               static_cast<unsigned long long>(a->commId()), registryAddr_.str().c_str());
    } else {
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement follower, looking for the leader in %s",
               static_cast<unsigned long long>(a->commId()), e->file.c_str());
    }
    if (nNodes > 1 && !tcp)
      a->setWaitHint("ranks on other hosts see the leader's file only where " + dir +
                     " is shared; ICN_TUNER_RENDEZVOUS=tcp://host:port with ICN_AUTH_KEY needs no shared directory");
    entries_.push_back(std::move(e));
    stop_ = false;
  }
  a->setWake([] { service().wake(); });
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  wake();
  return true;
}

void Service::detach(const Agreement* a) {
  std::lock_guard<std::mutex> life(lifeMu_);
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](auto& e) { return e->a.get() == a; });
    if (it == entries_.end()) return;
    Entry& e = **it;
    e.a->setWake(nullptr);
    // Best effort: tell the other side this is a normal end, so it does not warn about a lost peer.
    auto bye = [&](Conn& c) {
      if (c.state != Conn::State::Ready || c.dead) return;
      send(c, kBye, {});
      flush(c);
    };
    for (auto& c : e.followers) bye(*c);
    if (e.leader) bye(*e.leader);
    if (a->role() == Agreement::Role::Leader) unlink(e.file.c_str());
    for (auto& p : pending_)
      if (p->entry == &e) p->dead = true;
    entries_.erase(it);
    last = entries_.empty();
    if (last) {
      stop_ = true;
      listener_.reset();
      registry_.reset();
      regConns_.clear();
      pending_.clear();
    }
  }
  if (last && thread_.joinable()) {
    wake();
    thread_.join();
  }
}

Entry* Service::find(uint64_t commId, int nRanks, Agreement::Role role) {
  for (auto& e : entries_)
    if (e->a->commId() == commId && e->a->nRanks() == nRanks && e->a->role() == role) return e.get();
  return nullptr;
}

void Service::send(Conn& c, uint8_t type, const std::string& payload) {
  if (c.dead) return;
  if (c.out.size() > kMaxQueued) return fail(c, "it does not read what we send");
  c.out += frame(type, payload);
}

void Service::flush(Conn& c) {
  while (!c.dead && !c.out.empty() && c.state != Conn::State::Connecting) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return fail(c, "its connection broke");
    }
  }
}

void Service::fail(Conn& c, const char* what) {
  if (c.dead) return;
  c.dead = true;
  if (c.kind == Conn::Kind::RegServer) return;  // its registration (if any) goes with it
  if (c.kind == Conn::Kind::RegClient) return regFailed(*c.entry, c, what);
  Entry* e = c.entry;
  if (!e || c.state != Conn::State::Ready) {
    if (e && e->a->role() == Agreement::Role::Follower) e->nextLook = Clock::now() + std::chrono::milliseconds(20);
    return;  // a handshake that did not finish: the follower looks again, the leader forgets it
  }
  Agreement& a = *e->a;
  uint64_t h = a.start() == Agreement::kNever ? 0 : a.horizon() + 1;
  if (c.bye) {
    a.freeze(h, "the other side finalized the communicator", /*quiet=*/true);
    return;
  }
  char why[160];
  snprintf(why, sizeof why, "%s %s: %s", a.role() == Agreement::Role::Leader ? "follower" : "leader", c.peer.c_str(),
           what);
  a.freeze(h, why);
}

void Service::readConn(Conn& c) {
  char buf[4096];
  while (!c.dead) {
    ssize_t n = recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (c.in.size() > kHeader + kMaxPayload + sizeof buf) return fail(c, "sent an oversized frame");
    } else if (n == 0) {
      return fail(c, "its process left (connection closed)");
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else {
      return fail(c, "its connection broke");
    }
    while (!c.dead && c.in.size() >= kHeader) {
      Reader h{reinterpret_cast<const uint8_t*>(c.in.data()), kHeader};
      uint32_t magic = h.u32();
      uint8_t type = h.u8();
      h.u8(), h.u8(), h.u8();
      uint32_t len = h.u32();
      if (magic != kMagic || len > kMaxPayload) return fail(c, "sent a malformed frame");
      if (c.in.size() < kHeader + len) break;
      Reader r{reinterpret_cast<const uint8_t*>(c.in.data()) + kHeader, len};
      handle(c, type, r);
      c.in.erase(0, kHeader + len);
    }
  }
}

void Service::handle(Conn& c, uint8_t type, Reader& r) {
  using S = Conn::State;
  auto bad = [&] { fail(c, "broke the agreement protocol"); };
  if (c.state == S::AwaitHello) {  // leader or registry side, accepted connection
    if (type != kHello) return bad();
    uint64_t commId = r.u64();
    uint32_t nRanks = r.u32();
    r.bytes(c.nf.data(), c.nf.size());
    uint8_t mac[32];
    r.bytes(mac, sizeof mac);
    if (!r.done() || nRanks < 2 || nRanks > (1u << 24)) return bad();
    bool registry = c.kind == Conn::Kind::RegServer;
    Entry* e = registry ? nullptr : find(commId, static_cast<int>(nRanks), Agreement::Role::Leader);
    Token t = registry ? registryToken() : e ? e->token : Token{};
    if ((!registry && !e) || !sameDigest(proof(t, 'F', commId, c.nl, c.nf), mac)) {
      ICN_WARN(subsys::Tuning, "tuner: agreement%s: %s did not prove the %s of comm 0x%llx; refused",
               registry ? " registry" : "", c.peer.c_str(), registry ? "job key" : "rendezvous secret",
               static_cast<unsigned long long>(commId));
      c.dead = true;
      return;
    }
    c.entry = e;
    c.regComm = commId;
    c.regRanks = static_cast<int>(nRanks);
    c.state = S::Ready;
    Digest m = proof(t, 'L', commId, c.nl, c.nf);
    Writer w;
    w.bytes(m.data(), m.size());
    send(c, kWelcome, w.b);
    return;
  }
  if (c.kind == Conn::Kind::RegServer) return handleRegistry(c, type, r);
  Entry& e = *c.entry;
  Agreement& a = *e.a;
  if (c.state == S::AwaitChallenge) {  // follower side
    if (type != kChallenge) return bad();
    r.bytes(c.nl.data(), c.nl.size());
    if (!r.done()) return bad();
    auth::fillNonce(std::span<uint8_t, 16>(c.nf.data(), 16));
    Digest m = proof(c.kind == Conn::Kind::RegClient ? registryToken() : e.token, 'F', a.commId(), c.nl, c.nf);
    Writer w;
    w.u64(a.commId());
    w.u32(static_cast<uint32_t>(a.nRanks()));
    w.bytes(c.nf.data(), c.nf.size());
    w.bytes(m.data(), m.size());
    send(c, kHello, w.b);
    c.state = S::AwaitWelcome;
    return;
  }
  if (c.state == S::AwaitWelcome) {
    uint8_t mac[32];
    r.bytes(mac, sizeof mac);
    if (type != kWelcome || !r.done()) return bad();
    bool registry = c.kind == Conn::Kind::RegClient;
    if (!sameDigest(proof(registry ? registryToken() : e.token, 'L', a.commId(), c.nl, c.nf), mac)) {
      if (!registry || !e.regDistrustWarned)  // a registry is retried: said once
        ICN_WARN(subsys::Tuning, "tuner: agreement: %s did not prove the %s of comm 0x%llx; left",
                 c.peer.c_str(), registry ? "job key (not our registry)" : "rendezvous secret",
                 static_cast<unsigned long long>(a.commId()));
      if (registry) e.regDistrustWarned = true;
      return fail(c, "wrong secret");
    }
    c.state = S::Ready;
    if (registry) {
      Writer w;
      if (a.role() == Agreement::Role::Leader) {
        putAddr(w, listenAddr_);
        send(c, kRegister, w.b);
      } else {
        send(c, kLookup, w.b);
      }
      return;
    }
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: joined the agreement leader at %s",
             static_cast<unsigned long long>(a.commId()), c.peer.c_str());
    return;
  }
  if (c.kind == Conn::Kind::RegClient) {
    std::string addr;
    SockAddr sa;
    if (type != kFound || a.role() != Agreement::Role::Follower || !getAddr(r, &addr, &sa) || !r.done())
      return bad();
    e.found = addr;
    return;
  }
  if (type == kBye) {
    c.bye = true;
    return fail(c, "finalized");
  }
  if (a.role() == Agreement::Role::Leader) {
    if (type == kMembers) {
      uint32_t n = r.u32();
      if (!r.done() || n == 0 || n > static_cast<uint32_t>(a.nRanks())) return bad();
      c.members = static_cast<int>(n);
      int sum = 0, procs = 0;  // followers of this communicator, including any authenticated in this round
      for (auto& f : e.followers)
        if (!f->dead && f->members > 0) sum += f->members, ++procs;
      for (auto& p : pending_)
        if (p && !p->dead && p->entry == &e && p->state == Conn::State::Ready && p->members > 0)
          sum += p->members, ++procs;
      a.onMembers(sum, procs);
      return;
    }
    if (type == kReport) {
      // One report per bucket and follower: at most kNumColls x kNumBuckets messages a connection.
      int rc = 0, rb = 0;
      std::vector<ArmEstimate> arms;
      if (!getReport(r, &rc, &rb, &arms) || c.reported[rc][rb]) return bad();
      c.reported[rc][rb] = true;
      if (!a.onReport(rc, rb, arms)) return bad();
      return;
    }
    if (type == kDrop) {
      uint64_t h = r.u64();
      if (!r.done()) return bad();
      char why[160];
      snprintf(why, sizeof why, "follower %s waited in vain past call %llu", c.peer.c_str(),
               static_cast<unsigned long long>(h == Agreement::kNever ? 0 : h));
      uint64_t at = h == Agreement::kNever ? 0 : h + 1;
      if (a.start() != Agreement::kNever && at <= a.horizon() && h != Agreement::kNever && a.horizon() > h)
        ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: follower %s froze at call %llu while horizon %llu was on its "
                 "way: its choices may differ from the others' after that call",
                 static_cast<unsigned long long>(a.commId()), c.peer.c_str(), static_cast<unsigned long long>(at),
                 static_cast<unsigned long long>(a.horizon()));
      a.freeze(at, why);
      return;
    }
    return bad();
  }
  std::vector<AgreedDecision> ds;
  if (type == kStart) {
    uint64_t s = r.u64(), h = r.u64();
    if (!getDecisions(r, &ds) || !r.done() || !a.onStart(s, h, ds)) return bad();
    return;
  }
  if (type == kHorizon) {
    uint64_t h = r.u64();
    if (!getDecisions(r, &ds) || !r.done() || !a.onHorizon(h, ds)) return bad();
    return;
  }
  if (type == kFreeze) {
    uint64_t f = r.u64();
    uint8_t quiet = r.u8();
    if (!r.done() || quiet > 1) return bad();
    if (quiet)
      a.freeze(f, "another process finalized the communicator", true);
    else
      a.freeze(f, "the leader's process stopped the agreement");
    return;
  }
  bad();
}

void Service::lookForLeader(Entry& e) {
  Agreement& a = *e.a;
  if (e.tcp) {
    stepRegistryClient(e);
    if (e.leader || a.frozen() || e.found.empty()) return;
    // The registry's word is only a hint: the leader still has to prove the communicator's secret.
    auto c = std::make_unique<Conn>();
    SockAddr sa;
    std::string addr = std::move(e.found);
    e.found.clear();
    e.reg.reset();
    if (!parseAddr(addr, &sa) || startConnect(sa, &c->fd) != Status::Ok) return;
    c->peer = addr;
    c->state = Conn::State::Connecting;
    c->deadline = Clock::now() + kConnect;
    c->entry = &e;
    e.leader = std::move(c);
    return;
  }
  if (e.leader || a.frozen() || Clock::now() < e.nextLook) return;
  e.nextLook = Clock::now() + kLookEvery;
  int fd = open(e.file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  Fd file(fd);
  struct stat st {};
  char buf[512] = {};
  ssize_t n = 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || st.st_size >= 512 ||
      (n = read(fd, buf, sizeof buf - 1)) <= 0) {
    if (!e.warnedStale)
      ICN_WARN(subsys::Tuning, "tuner: agreement: %s is not a rendezvous file of ours; ignored", e.file.c_str());
    e.warnedStale = true;
    return;
  }
  std::string text(buf, static_cast<size_t>(n)), addr, token;
  size_t at = 0;
  bool header = false;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    if (line == "icn-agree 1") header = true;
    if (line.rfind("addr ", 0) == 0) addr = line.substr(5);
    if (line.rfind("token ", 0) == 0) token = line.substr(6);
  }
  SockAddr sa;
  if (!header || !parseAddr(addr, &sa) || !unhex(token, e.token.data(), e.token.size())) return;  // being written
  auto c = std::make_unique<Conn>();
  if (startConnect(sa, &c->fd) != Status::Ok) return;
  c->peer = addr;
  c->state = Conn::State::Connecting;
  c->deadline = Clock::now() + kConnect;
  c->entry = &e;
  e.leader = std::move(c);
}

void Service::acceptAll(Fd& listener, Conn::Kind kind) {
  for (int i = 0; i < 64 && listener.valid(); ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = accept4(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (static_cast<int>(pending_.size()) >= kMaxPending) {
      close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd.reset(fd);
    SockAddr a;
    memcpy(&a.storage, &ss, len);
    a.len = len;
    c->peer = a.str();
    c->kind = kind;
    c->state = Conn::State::AwaitHello;
    c->deadline = Clock::now() + kHandshake;
    auth::fillNonce(std::span<uint8_t, 16>(c->nl.data(), 16));
    Writer w;
    w.bytes(c->nl.data(), c->nl.size());
    send(*c, kChallenge, w.b);
    flush(*c);
    pending_.push_back(std::move(c));
  }
}

void Service::step(Entry& e) {
  Agreement& a = *e.a;
  if (a.role() == Agreement::Role::Leader) {
    if (e.tcp) stepRegistryClient(e);
    auto all = [&](uint8_t type, const std::string& payload) {
      for (auto& f : e.followers) send(*f, type, payload);
    };
    // START and horizons count as sent (the leader's own calls may use them) only once every follower's socket
    // took them: from there the kernel delivers them even while this process is stopped, so a follower that gives
    // up waiting holds the same horizon the leader's calls are held to.
    auto delivered = [&] {
      for (auto& f : e.followers) {
        flush(*f);
        if (!f->dead && !f->out.empty()) return false;
      }
      return true;
    };
    if (a.frozen()) {
      if (!e.freezeSent) {
        Writer w;
        w.u64(a.frozenFrom());
        w.u8(a.frozenQuietly() ? 1 : 0);
        all(kFreeze, w.b);
        e.freezeSent = true;
      }
    } else if (e.inFlight) {
      if (delivered()) {
        e.inFlight = false;
        if (e.inFlightStart)
          a.sentStart(e.flightS, e.flightH, e.flightDecisions);
        else
          a.sentHorizon(e.flightH, e.flightDecisions);
      }
    } else {
      uint64_t s = 0, h = 0;
      std::vector<AgreedDecision> ds;
      bool start = a.takeStart(&s, &h, &ds);
      if (start || a.takeHorizon(&h, &ds)) {
        if (ds.size() > kMaxDecisions) ds.resize(kMaxDecisions);
        Writer w;
        if (start) w.u64(s);
        w.u64(h);
        putDecisions(w, ds);
        all(start ? kStart : kHorizon, w.b);
        e.inFlight = true;
        e.inFlightStart = start;
        e.flightS = s;
        e.flightH = h;
        e.flightDecisions = std::move(ds);
        if (delivered()) {
          e.inFlight = false;
          if (start)
            a.sentStart(s, h, e.flightDecisions);
          else
            a.sentHorizon(h, e.flightDecisions);
        }
      }
    }
    for (auto& f : e.followers) flush(*f);
    e.followers.erase(std::remove_if(e.followers.begin(), e.followers.end(), [](auto& f) { return f->dead; }),
                      e.followers.end());
    return;
  }
  lookForLeader(e);
  if (!e.leader) return;
  Conn& c = *e.leader;
  // A follower that already gave up never reports its ranks: without them the leader cannot start, so no process
  // tunes a call this one runs untuned.
  if (c.state == Conn::State::Ready && !e.membersSent && a.localRanks() > 0 && !a.frozen()) {
    Writer w;
    w.u32(static_cast<uint32_t>(a.localRanks()));
    send(c, kMembers, w.b);
    e.membersSent = true;
  }
  int rc = 0, rb = 0;
  std::vector<ArmEstimate> arms;
  while (c.state == Conn::State::Ready && !c.dead && a.takeReport(&rc, &rb, &arms)) {
    Writer w;
    putReport(w, rc, rb, arms);
    send(c, kReport, w.b);
  }
  uint64_t h = 0;
  if (c.state == Conn::State::Ready && a.takeDrop(&h)) {
    Writer w;
    w.u64(h);
    send(c, kDrop, w.b);
  }
  flush(c);
  if (c.dead) e.leader.reset();
}

void Service::loop() {
  std::vector<pollfd> fds;
  std::unordered_map<int, short> events;
  while (true) {
    fds.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      fds.push_back(pollfd{wakeFd_.get(), POLLIN, 0});
      if (listener_.valid()) fds.push_back(pollfd{listener_.get(), POLLIN, 0});
      if (registry_.valid()) fds.push_back(pollfd{registry_.get(), POLLIN, 0});
      auto add = [&](const Conn& c) {
        if (c.dead) return;
        short ev = POLLIN;
        if (!c.out.empty() || c.state == Conn::State::Connecting) ev |= POLLOUT;
        fds.push_back(pollfd{c.fd.get(), ev, 0});
      };
      for (auto& c : pending_) add(*c);
      for (auto& c : regConns_) add(*c);
      for (auto& e : entries_) {
        for (auto& f : e->followers) add(*f);
        if (e->leader) add(*e->leader);
        if (e->reg) add(*e->reg);
      }
    }
    poll(fds.data(), fds.size(), 2);
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    events.clear();
    for (const pollfd& p : fds) events[p.fd] = p.revents;
    uint64_t drain = 0;
    while (read(wakeFd_.get(), &drain, sizeof drain) > 0) {
    }
    acceptAll(listener_, Conn::Kind::Agree);
    acceptAll(registry_, Conn::Kind::RegServer);
    auto now = Clock::now();
    auto serve = [&](Conn& c) {
      short ev = events.count(c.fd.get()) ? events[c.fd.get()] : 0;
      if (c.state == Conn::State::Connecting) {
        // A refused connect is routine here (a registry or leader not up yet): retried, not warned about.
        bool connected = false;
        if (ev & (POLLOUT | POLLERR | POLLHUP)) {
          int err = 0;
          socklen_t len = sizeof err;
          getsockopt(c.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) return fail(c, "connect failed");
          connected = (ev & POLLOUT) != 0;
        }
        if (!connected) {
          if (now > c.deadline) fail(c, "connect timed out");
          return;
        }
        c.state = Conn::State::AwaitChallenge;
        // The registry answers at once; a peer there that does not is not ours.
        c.deadline = now + (c.kind == Conn::Kind::RegClient ? kConnect : kHandshake);
      }
      if (ev & (POLLIN | POLLHUP | POLLERR)) readConn(c);
      if (c.state != Conn::State::Ready && now > c.deadline) fail(c, "handshake timed out");
      flush(c);
    };
    for (auto& c : pending_) serve(*c);
    for (auto& c : regConns_) serve(*c);
    // Authenticated connections move to their leader entry, or to the registry's clients.
    for (auto& c : pending_) {
      if (c->dead || c->state != Conn::State::Ready) continue;
      if (c->kind == Conn::Kind::RegServer) {
        if (regConns_.size() >= kMaxRegistryClients) {
          ICN_WARN(subsys::Tuning, "tuner: agreement registry: more than %zu clients; %s refused",
                   kMaxRegistryClients, c->peer.c_str());
          c->dead = true;
          continue;
        }
        regConns_.push_back(std::move(c));
      } else if (c->entry) {
        c->entry->followers.push_back(std::move(c));
      }
    }
    regConns_.erase(std::remove_if(regConns_.begin(), regConns_.end(), [](auto& c) { return c->dead; }),
                    regConns_.end());
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](auto& c) { return !c || c->dead; }),
                   pending_.end());
    for (auto& e : entries_) {
      for (auto& f : e->followers) serve(*f);
      if (e->leader) serve(*e->leader);
      if (e->leader && e->leader->dead) e->leader.reset();
      if (e->reg) serve(*e->reg);
      step(*e);
    }
  }
}

std::string rendezvousDir(std::string* why) {
  std::string dir = params::getStringNow(params::Id::TunerRendezvous);
  if (!dir.empty() && !isNetworkRendezvous(dir)) return privfile::ensureDir(dir, why) == Status::Ok ? dir : "";
  return privfile::runtimeDir(&dir, why) == Status::Ok ? dir : "";
}

bool attach(const std::shared_ptr<Agreement>& a, int nNodes, std::string* why) {
  return service().attach(a, nNodes, why);
}
void detach(const Agreement* a) { service().detach(a); }

}  // namespace icn::tuner::agree
