#include "tuner/agree/service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
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
#include "tuner/agree/service_impl.h"
#include "tuner/agree/wire.h"

namespace icn::tuner::agree {


bool isNetworkRendezvous(const std::string& spec) { return spec.rfind("tcp://", 0) == 0; }

Service& service() {
  static Service* s = new Service();  // never destroyed: detach joins the thread with the last agreement
  return *s;
}

bool Service::attach(const std::shared_ptr<Agreement>& a, int nNodes, std::string* why) {
  std::lock_guard<std::mutex> life(lifeMu_);
  auto e = std::make_unique<Entry>();
  e->a = a;
  std::string dir;
  if (!chooseRendezvous(nNodes, &e->tcp, &dir, why)) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!wakeFd_.valid()) wakeFd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!e->tcp) {
      char name[64];
      snprintf(name, sizeof name, "/agree-%016llx-%d", static_cast<unsigned long long>(a->commId()), a->nRanks());
      e->file = dir + name;
    } else {
      e->token = commToken(a->commId(), a->nRanks());
      serveRegistry();
    }
    if (a->role() == Agreement::Role::Leader) {
      if (!publishLeader(*e, why)) return false;
    } else if (e->tcp) {
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement follower, asking the registry %s for the leader",
               static_cast<unsigned long long>(a->commId()), registryAddr_.str().c_str());
    } else {
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement follower, looking for the leader in %s",
               static_cast<unsigned long long>(a->commId()), e->file.c_str());
    }
    if (nNodes > 1 && !e->tcp)
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
  // Either side stops where no rank can have passed: the leader at the horizon it announced + 1, a follower at the
  // horizon it holds + 1 (0 before START).
  if (c.bye) {
    char why[160];
    snprintf(why, sizeof why, "%s %s finalized the communicator",
             a.role() == Agreement::Role::Leader ? "follower" : "the leader's process", c.peer.c_str());
    a.stop(why, /*quiet=*/true);
    return;
  }
  char why[160];
  snprintf(why, sizeof why, "%s %s: %s", a.role() == Agreement::Role::Leader ? "follower" : "leader", c.peer.c_str(),
           what);
  a.stop(why);
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

constexpr const char* kBrokeProtocol = "broke the agreement protocol";

const char* frameName(uint8_t type) {
  static const char* names[] = {"?",     "CHALLENGE", "HELLO",  "WELCOME", "MEMBERS", "START",  "HORIZON",
                                "FREEZE", "DROP",      "BYE",    "REGISTER", "LOOKUP", "FOUND", "REPORT",
                                "CONTESTED", "DIAG"};
  return type < sizeof names / sizeof names[0] ? names[type] : "an unknown frame";
}

void Service::handle(Conn& c, uint8_t type, Reader& r) {
  using S = Conn::State;
  if (c.state == S::AwaitHello) return onHello(c, type, r);  // leader or registry side, accepted connection
  if (c.kind == Conn::Kind::RegServer) return handleRegistry(c, type, r);
  if (c.state == S::AwaitChallenge) return onChallenge(c, type, r);  // follower side
  if (c.state == S::AwaitWelcome) return onWelcome(c, type, r);
  if (c.kind == Conn::Kind::RegClient) return fromRegistry(c, type, r);
  if (c.entry->a->role() == Agreement::Role::Leader) return fromFollower(c, type, r);
  fromLeader(c, type, r);
}

void Service::onHello(Conn& c, uint8_t type, Reader& r) {
  if (type != kHello) return fail(c, kBrokeProtocol);
  uint64_t commId = r.u64();
  uint32_t nRanks = r.u32();
  r.bytes(c.nf.data(), c.nf.size());
  uint8_t mac[32];
  r.bytes(mac, sizeof mac);
  if (!r.done() || nRanks < 2 || nRanks > (1u << 24)) return fail(c, kBrokeProtocol);
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
  c.state = Conn::State::Ready;
  Digest m = proof(t, 'L', commId, c.nl, c.nf);
  Writer w;
  w.bytes(m.data(), m.size());
  send(c, kWelcome, w.b);
  if (!registry) join(c);
}

void Service::onChallenge(Conn& c, uint8_t type, Reader& r) {
  Entry& e = *c.entry;
  Agreement& a = *e.a;
  if (type != kChallenge) return fail(c, kBrokeProtocol);
  r.bytes(c.nl.data(), c.nl.size());
  if (!r.done()) return fail(c, kBrokeProtocol);
  auth::fillNonce(std::span<uint8_t, 16>(c.nf.data(), 16));
  Digest m = proof(c.kind == Conn::Kind::RegClient ? registryToken() : e.token, 'F', a.commId(), c.nl, c.nf);
  Writer w;
  w.u64(a.commId());
  w.u32(static_cast<uint32_t>(a.nRanks()));
  w.bytes(c.nf.data(), c.nf.size());
  w.bytes(m.data(), m.size());
  send(c, kHello, w.b);
  c.state = Conn::State::AwaitWelcome;
}

void Service::onWelcome(Conn& c, uint8_t type, Reader& r) {
  Entry& e = *c.entry;
  Agreement& a = *e.a;
  uint8_t mac[32];
  r.bytes(mac, sizeof mac);
  if (type != kWelcome || !r.done()) return fail(c, kBrokeProtocol);
  bool registry = c.kind == Conn::Kind::RegClient;
  if (!sameDigest(proof(registry ? registryToken() : e.token, 'L', a.commId(), c.nl, c.nf), mac)) {
    if (!registry || !e.regDistrustWarned)  // a registry is retried: said once
      ICN_WARN(subsys::Tuning, "tuner: agreement: %s did not prove the %s of comm 0x%llx; left", c.peer.c_str(),
               registry ? "job key (not our registry)" : "rendezvous secret",
               static_cast<unsigned long long>(a.commId()));
    if (registry) e.regDistrustWarned = true;
    return fail(c, "wrong secret");
  }
  c.state = Conn::State::Ready;
  if (!registry) {
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: joined the agreement leader at %s",
             static_cast<unsigned long long>(a.commId()), c.peer.c_str());
    return;
  }
  Writer w;
  if (a.role() == Agreement::Role::Leader) {
    putAddr(w, listenAddr_);
    send(c, kRegister, w.b);
  } else {
    send(c, kLookup, w.b);
  }
}

void Service::fromRegistry(Conn& c, uint8_t type, Reader& r) {
  Entry& e = *c.entry;
  std::string addr, other;
  SockAddr sa;
  if (type == kContested) {
    if (!getText(r, &addr) || !getText(r, &other) || !r.done()) return fail(c, kBrokeProtocol);
    return contested(e, addr, other);
  }
  if (type != kFound || e.a->role() != Agreement::Role::Follower || !getAddr(r, &addr, &sa) || !r.done())
    return fail(c, kBrokeProtocol);
  // Once connected, a follower keeps its leader: a later registration is either the same leader (after the
  // registry moved) or a claim the registry reports as contested.
  if (!e.leader && !e.contested) e.found = addr;
}

void Service::join(Conn& c) {
  Entry& e = *c.entry;
  Agreement& a = *e.a;
  switch (a.join(c.peer, &c.member)) {
    case Agreement::Join::Member:
      return;
    case Agreement::Join::TooMany: {
      ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: follower %s joins after %d processes of a %d-rank communicator: "
               "more processes than ranks, so some member holds no rank; dropped",
               static_cast<unsigned long long>(a.commId()), c.peer.c_str(), a.nRanks() - 1, a.nRanks());
      std::string why = "follower " + c.peer + " joined as one process more than the communicator has ranks";
      a.stop(why.c_str());
      c.dead = true;
      return;
    }
    case Agreement::Join::Late:
      break;
  }
  // Every rank was held before this process came, so somebody claimed ranks it does not hold. The newcomer may be
  // an honest one that was pushed out: it gets everything announced, then the stop, and so chooses as the others.
  std::string why = "follower " + c.peer + " joined after START, when every rank was held: a member claimed ranks "
                    "it does not hold";
  ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: %s; it gets what was announced and the agreement stops",
           static_cast<unsigned long long>(a.commId()), why.c_str());
  a.stop(why.c_str());
  sendHistory(c, a);
}

void Service::sendHistory(Conn& c, const Agreement& a) {
  for (const Agreement::Announcement& m : a.history()) send(c, m.start ? kStart : kHorizon, announcementPayload(m));
}

void Service::lie(Conn& c, const std::string& what, bool drop) {
  Agreement& a = *c.entry->a;
  ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: follower %s %s; %s", static_cast<unsigned long long>(a.commId()),
           c.peer.c_str(), what.c_str(), drop ? "dropped" : "the agreement stops for every process");
  std::string why = "follower " + c.peer + " " + what;
  a.stop(why.c_str());
  if (drop) c.dead = true;  // stopped already: its closing says nothing more
}

void Service::fromFollower(Conn& c, uint8_t type, Reader& r) {
  Agreement& a = *c.entry->a;
  if (type == kMembers) return onMembers(c, r);
  if (type == kReport) return onReport(c, r);
  if (type == kDrop) return onDrop(c, r);
  if (type == kDiag) return onDiag(c, r);
  char buf[200];
  if (type == kContested) {
    if (!r.done()) return lie(c, "sent a malformed CONTESTED");
    snprintf(buf, sizeof buf, "follower %s: the registry holds two claims of rank 0 of this communicator",
             c.peer.c_str());
    ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: %s; the agreement stops", static_cast<unsigned long long>(a.commId()),
             buf);
    a.stop(buf);
    return;
  }
  if (type == kBye) {
    if (!r.done()) return lie(c, "sent a malformed BYE");
    c.bye = true;
    return fail(c, "finalized");
  }
  snprintf(buf, sizeof buf, "sent %s out of order (after its handshake a follower sends only MEMBERS, REPORT, DROP, "
           "CONTESTED, DIAG and BYE)", frameName(type));
  lie(c, buf);
}

void Service::onMembers(Conn& c, Reader& r) {
  std::vector<int> ranks;
  if (!getRanks(r, &ranks)) return lie(c, "sent a malformed MEMBERS (ranks not increasing, none, or too many)");
  if (c.membersSeen) return lie(c, "reported its ranks a second time");
  if (c.dropSeen) return lie(c, "reported its ranks after it gave up (DROP)");
  c.membersSeen = true;
  c.ranks = ranks;
  std::string l = c.entry->a->claimRanks(c.member, ranks);
  if (!l.empty()) lie(c, l, /*drop=*/false);
}

void Service::onReport(Conn& c, Reader& r) {
  int rc = 0, rb = 0;
  std::vector<ArmEstimate> arms;
  if (!getReport(r, &rc, &rb, &arms)) return lie(c, "sent a malformed REPORT");
  if (!c.membersSeen) return lie(c, "reported measurements before its ranks");
  if (c.reported[rc][rb]) {
    char buf[200];
    snprintf(buf, sizeof buf, "reported %s 2^%d B a second time", coll::collName(rc), rb);
    return lie(c, buf);
  }
  c.reported[rc][rb] = true;  // one per bucket: at most kNumColls x kNumBuckets reports a connection
  std::string l = c.entry->a->onReport(c.member, rc, rb, arms);
  if (!l.empty()) lie(c, l);
}

void Service::onDrop(Conn& c, Reader& r) {
  Agreement& a = *c.entry->a;
  char buf[200];
  uint64_t h = r.u64();
  if (!r.done()) return lie(c, "sent a malformed DROP");
  if (c.dropSeen) return lie(c, "gave up a second time (DROP)");
  c.dropSeen = true;
  uint64_t announced = a.announcedHorizon();  // 0: no START out
  if (h != Agreement::kNever && h > announced) {
    snprintf(buf, sizeof buf, "claims to have given up at horizon %llu, beyond any announced (%llu)",
             static_cast<unsigned long long>(h), static_cast<unsigned long long>(announced));
    return lie(c, buf);
  }
  // A follower stops at the horizon it holds + 1; the leader at the one it announced + 1, which no rank can have
  // passed. They differ only where an announcement reached the kernel but not the follower within the wait.
  if (announced > 0 && (h == Agreement::kNever || h < announced))
    ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: follower %s froze %s while horizon %llu was announced: its "
             "choices may differ from the others' after that call", static_cast<unsigned long long>(a.commId()),
             c.peer.c_str(), h == Agreement::kNever ? "before START" : ("at call " + std::to_string(h + 1)).c_str(),
             static_cast<unsigned long long>(announced));
  snprintf(buf, sizeof buf, "follower %s waited in vain past call %llu", c.peer.c_str(),
           static_cast<unsigned long long>(h == Agreement::kNever ? 0 : h));
  a.stop(buf);
}

void Service::fromLeader(Conn& c, uint8_t type, Reader& r) {
  Agreement& a = *c.entry->a;
  auto bad = [&](const char* what) {
    char why[160];
    snprintf(why, sizeof why, "sent %s", what);
    fail(c, why);
  };
  std::vector<AgreedDecision> ds;
  if (type == kStart) {
    uint64_t s = r.u64(), h = r.u64();
    if (!getDecisions(r, &ds) || !r.done() || !a.onStart(s, h, ds)) return bad("a START out of order or range");
    return;
  }
  if (type == kHorizon) {
    uint64_t h = r.u64();
    if (!getDecisions(r, &ds) || !r.done() || !a.onHorizon(h, ds)) return bad("a HORIZON out of order");
    return;
  }
  if (type == kFreeze) {
    uint64_t f = r.u64();
    uint8_t quiet = r.u8();
    if (!r.done() || quiet > 1) return bad("a malformed FREEZE");
    const char* why = quiet ? "another process finalized the communicator" : "the leader's process stopped the agreement";
    if (!a.onFreeze(f, why, quiet != 0))
      ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: leader %s stops the agreement at call %llu, not where the "
               "horizons it sent end (%llu): this process stops there",
               static_cast<unsigned long long>(a.commId()), c.peer.c_str(), static_cast<unsigned long long>(f),
               static_cast<unsigned long long>(a.frozenFrom()));
    return;
  }
  if (type == kBye) {
    c.bye = true;
    return fail(c, "finalized");
  }
  bad(frameName(type));
}

void Service::step(Entry& e) {
  if (e.a->role() == Agreement::Role::Leader) return stepLeader(e);
  lookForLeader(e);
  if (e.leader) stepFollower(e, *e.leader);
}

void Service::stepLeader(Entry& e) {
  Agreement& a = *e.a;
  if (e.tcp) stepRegistryClient(e);
  checkFile(e);
  auto all = [&](uint8_t type, const std::string& payload) {
    for (auto& f : e.followers) send(*f, type, payload);
  };
  // START and horizons count as delivered (the leader's own calls may use them) only once every follower's
  // socket took them: from there the kernel delivers them even while this process is stopped, so a follower that
  // gives up waiting holds the same horizon the leader's calls are held to.
  auto delivered = [&] {
    for (auto& f : e.followers) {
      flush(*f);
      if (!f->dead && !f->out.empty()) return false;
    }
    return true;
  };
  Agreement::Announcement m;
  if (a.frozen()) {
    if (!e.freezeSent) {
      all(kFreeze, freezePayload(a));
      e.freezeSent = true;
    }
  } else if (a.inFlight()) {
    if (delivered()) a.delivered();
  } else if (a.takeAnnouncement(&m)) {
    all(m.start ? kStart : kHorizon, announcementPayload(m));
    if (delivered()) a.delivered();
  }
  for (auto& f : e.followers) flush(*f);
  e.followers.erase(std::remove_if(e.followers.begin(), e.followers.end(), [](auto& f) { return f->dead; }),
                    e.followers.end());
}

void Service::stepFollower(Entry& e, Conn& c) {
  Agreement& a = *e.a;
  // A follower that gave up before START never reports its ranks: without them the leader cannot start, so no
  // process tunes a call this one runs untuned. Once it holds START its ranks change nothing but let the leader name
  // whoever else claimed them. One that knows none of its ranks (no profiler told them) cannot join.
  bool mayReport = !a.frozen() || a.start() != Agreement::kNever;
  if (c.state == Conn::State::Ready && !e.membersSent && a.localRanks() > 0 && mayReport) sendMembers(e, c);
  if (c.state == Conn::State::Ready && e.contested && !e.contestSent) {
    send(c, kContested, {});
    e.contestSent = true;
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
  if (c.state == Conn::State::Ready) sendDiagnosis(e, c);
  flush(c);
  if (c.dead) e.leader.reset();
}

void Service::sendMembers(Entry& e, Conn& c) {
  Agreement& a = *e.a;
  std::vector<int> ranks = a.ranks();
  e.membersSent = true;
  if (ranks.empty()) {
    ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: this process knows none of its ranks (the profiler's init "
             "tells them): it cannot join the agreement, which therefore never starts",
             static_cast<unsigned long long>(a.commId()));
    return;
  }
  Writer w;
  putRanks(w, ranks);
  send(c, kMembers, w.b);
  e.membersRanks = ranks;
}

void Service::loop() {
  pthread_setname_np(pthread_self(), "icn-agree");  // what top, gdb and the tests call it
  std::vector<pollfd> fds;
  std::unordered_map<int, short> events;
  while (true) {
    int tickMs = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      tickMs = pollSet(fds);
    }
    poll(fds.data(), fds.size(), tickMs);
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    events.clear();
    for (const pollfd& p : fds) events[p.fd] = p.revents;
    serveAll(events);
  }
}

int Service::pollSet(std::vector<pollfd>& fds) const {
  // Tuning: a follower's reports and the leader's horizons move within a few ms of a call. Gathering only: the
  // diagnosis's periods are seconds long, and a wake-up 500 times a second costs the ranks' own threads their
  // cores on a host where they are busy; every socket event still wakes the thread at once.
  constexpr int kTuningTickMs = 2, kGatherTickMs = 20;
  bool tuning = false;
  for (const auto& e : entries_) tuning = tuning || e->a->params().tunes;
  fds.clear();
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
  return tuning ? kTuningTickMs : kGatherTickMs;
}

void Service::serveAll(const std::unordered_map<int, short>& events) {
  uint64_t drain = 0;
  while (read(wakeFd_.get(), &drain, sizeof drain) > 0) {
  }
  acceptAll(listener_, Conn::Kind::Agree);
  acceptAll(registry_, Conn::Kind::RegServer);
  auto now = Clock::now();
  reportFlood(now);
  auto serve = [&](Conn& c) {
    auto it = events.find(c.fd.get());
    serveConn(c, it == events.end() ? 0 : it->second, now);
  };
  for (auto& c : pending_) serve(*c);
  for (auto& c : regConns_) serve(*c);
  adoptProven();
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

void Service::serveConn(Conn& c, short ev, Clock::time_point now) {
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
}

void Service::adoptProven() {
  // Authenticated connections move to their leader entry, or to the registry's clients.
  for (auto& c : pending_) {
    if (c->dead || c->state != Conn::State::Ready) continue;
    if (c->kind == Conn::Kind::RegServer) {
      if (regConns_.size() >= kMaxRegistryClients) {
        ICN_WARN(subsys::Tuning, "tuner: agreement registry: more than %zu clients; %s refused", kMaxRegistryClients,
                 c->peer.c_str());
        c->dead = true;
        continue;
      }
      regConns_.push_back(std::move(c));
    } else if (c->entry) {
      Entry& e = *c->entry;
      if (e.freezeSent) send(*c, kFreeze, freezePayload(*e.a));  // it joined after the stop went out: it gets it too
      e.followers.push_back(std::move(c));
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
