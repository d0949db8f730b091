#include "tuner/agree_service.h"

#include <arpa/inet.h>
#include <fcntl.h>
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

namespace icn::tuner::agree {
namespace {

using Clock = std::chrono::steady_clock;
using Token = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, 16>;

// Frame: magic u32 | type u8 | 3 zero bytes | payload length u32 | payload (little-endian integers).
constexpr uint32_t kMagic = 0x49434e41;  // "ICNA"
enum : uint8_t { kChallenge = 1, kHello, kWelcome, kMembers, kStart, kHorizon, kFreeze, kDrop, kBye };
constexpr size_t kHeader = 12;
constexpr uint32_t kMaxPayload = 4096;
constexpr size_t kMaxQueued = 1 << 20;  // bytes waiting for a slow peer before it is dropped
constexpr size_t kMaxDecisions = (kMaxPayload - 20) / 8;
constexpr auto kHandshake = std::chrono::seconds(5);
constexpr auto kConnect = std::chrono::seconds(1);
constexpr auto kLookEvery = std::chrono::milliseconds(2);
constexpr int kMaxPending = 256;  // accepted connections that have not proven the secret yet

struct Writer {
  std::string b;
  void u8(uint8_t v) { b.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(const uint8_t* p, size_t n) { b.append(reinterpret_cast<const char*>(p), n); }
};

struct Reader {
  const uint8_t* p;
  size_t n, off = 0;
  bool ok = true;
  bool need(size_t k) {
    ok = ok && off + k <= n;
    return ok;
  }
  uint8_t u8() { return need(1) ? p[off++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
  void bytes(uint8_t* dst, size_t k) {
    if (!need(k)) return;
    memcpy(dst, p + off, k);
    off += k;
  }
  bool done() const { return ok && off == n; }
};

std::string frame(uint8_t type, const std::string& payload) {
  Writer w;
  w.u32(kMagic);
  w.u8(type);
  w.u8(0);
  w.u8(0);
  w.u8(0);
  w.u32(static_cast<uint32_t>(payload.size()));
  return w.b + payload;
}

void putDecisions(Writer& w, const std::vector<AgreedDecision>& ds) {
  w.u32(static_cast<uint32_t>(ds.size()));
  for (const AgreedDecision& a : ds) {
    w.u8(static_cast<uint8_t>(a.coll));
    w.u8(static_cast<uint8_t>(a.bucket));
    w.u8(static_cast<uint8_t>(a.d.algo + 1));
    w.u8(static_cast<uint8_t>(a.d.proto + 1));
    w.u32(static_cast<uint32_t>(a.d.channels));
  }
}

bool getDecisions(Reader& r, std::vector<AgreedDecision>* out) {
  uint32_t n = r.u32();
  if (!r.ok || n > kMaxDecisions) return false;
  for (uint32_t i = 0; i < n && r.ok; ++i) {
    AgreedDecision a;
    a.coll = r.u8();
    a.bucket = r.u8();
    int algo = static_cast<int>(r.u8()) - 1, proto = static_cast<int>(r.u8()) - 1;
    uint32_t ch = r.u32();
    if (a.coll >= coll::kNumColls || a.bucket >= coll::kNumBuckets || algo >= coll::kNumAlgos ||
        proto >= coll::kNumProtos || ch > 64)
      return false;
    a.d = Decision{static_cast<int8_t>(algo), static_cast<int8_t>(proto), static_cast<int16_t>(ch)};
    out->push_back(a);
  }
  return r.ok;
}

Digest proof(const Token& t, char role, uint64_t commId, const Nonce& nl, const Nonce& nf) {
  Writer w;
  w.u8(static_cast<uint8_t>(role));
  w.u64(commId);
  w.bytes(nl.data(), nl.size());
  w.bytes(nf.data(), nf.size());
  auto* m = reinterpret_cast<const uint8_t*>(w.b.data());
  return hmacSha256(std::span<const uint8_t>(t.data(), t.size()), std::span<const uint8_t>(m, w.b.size()));
}

bool sameDigest(const Digest& a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

bool unhex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int v = 0;
    for (int j = 0; j < 2; ++j) {
      char c = s[2 * i + j];
      int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (x < 0) return false;
      v = v * 16 + x;
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

bool parseAddr(const std::string& s, SockAddr* a) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = s.substr(0, colon);
  int port = atoi(s.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  *a = SockAddr{};
  if (!host.empty() && host.front() == '[' && host.back() == ']') {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a->storage);
    std::string h = host.substr(1, host.size() - 2);
    std::string scope;
    if (size_t pct = h.find('%'); pct != std::string::npos) {
      scope = h.substr(pct + 1);
      h = h.substr(0, pct);
    }
    if (inet_pton(AF_INET6, h.c_str(), &in6->sin6_addr) != 1) return false;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    in6->sin6_scope_id = scope.empty() ? 0 : if_nametoindex(scope.c_str());
    a->len = sizeof(sockaddr_in6);
    return true;
  }
  auto* in = reinterpret_cast<sockaddr_in*>(&a->storage);
  if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) return false;
  in->sin_family = AF_INET;
  in->sin_port = htons(static_cast<uint16_t>(port));
  a->len = sizeof(sockaddr_in);
  return true;
}

struct Entry;

struct Conn {
  enum class State { Connecting, AwaitChallenge, AwaitWelcome, AwaitHello, Ready };
  Fd fd;
  std::string peer;
  std::string in, out;
  State state;
  Nonce nl{}, nf{};
  Clock::time_point deadline;
  Entry* entry = nullptr;
  int members = 0;
  bool dead = false, bye = false;
};

struct Entry {
  std::shared_ptr<Agreement> a;
  Token token{};
  std::string file;  // the leader's rendezvous file
  std::vector<std::unique_ptr<Conn>> followers;  // leader: authenticated followers
  std::unique_ptr<Conn> leader;                  // follower: its connection to the leader
  Clock::time_point nextLook{};
  bool membersSent = false, freezeSent = false, warnedStale = false;
  // Leader: a START or horizon queued but not yet taken by every follower's socket.
  bool inFlight = false, inFlightStart = false;
  uint64_t flightS = 0, flightH = 0;
  std::vector<AgreedDecision> flightDecisions;
};

class Service {
 public:
  bool attach(const std::shared_ptr<Agreement>& a, std::string* why);
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
  void acceptAll();
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
  std::thread thread_;
  bool stop_ = false;
};

Service& service() {
  static Service* s = new Service();  // never destroyed: detach joins the thread with the last agreement
  return *s;
}

bool Service::attach(const std::shared_ptr<Agreement>& a, std::string* why) {
  std::lock_guard<std::mutex> life(lifeMu_);
  std::string dir = rendezvousDir(why);
  if (dir.empty()) return false;
  auto e = std::make_unique<Entry>();
  e->a = a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!wakeFd_.valid()) wakeFd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    char name[64];
    snprintf(name, sizeof name, "/agree-%016llx-%d", static_cast<unsigned long long>(a->commId()), a->nRanks());
    e->file = dir + name;
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
      auth::fillNonce(std::span<uint8_t, 16>(e->token.data(), 16));
      auth::fillNonce(std::span<uint8_t, 16>(e->token.data() + 16, 16));
      std::string text = "icn-agree 1\naddr " + listenAddr_ + "\ntoken " + hex(e->token.data(), e->token.size()) + "\n";
      if (privfile::writeAtomic(e->file, text, false, why) != Status::Ok) return false;
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement leader at %s (rendezvous %s)",
               static_cast<unsigned long long>(a->commId()), listenAddr_.c_str(), e->file.c_str());
    } else {
      ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement follower, looking for the leader in %s",
               static_cast<unsigned long long>(a->commId()), e->file.c_str());
    }
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
  if (c.state == S::AwaitHello) {  // leader side, accepted connection
    if (type != kHello) return bad();
    uint64_t commId = r.u64();
    uint32_t nRanks = r.u32();
    r.bytes(c.nf.data(), c.nf.size());
    uint8_t mac[32];
    r.bytes(mac, sizeof mac);
    if (!r.done() || nRanks > (1u << 24)) return bad();
    Entry* e = find(commId, static_cast<int>(nRanks), Agreement::Role::Leader);
    if (!e || !sameDigest(proof(e->token, 'F', commId, c.nl, c.nf), mac)) {
      ICN_WARN(subsys::Tuning, "tuner: agreement: %s did not prove the rendezvous secret of comm 0x%llx; refused",
               c.peer.c_str(), static_cast<unsigned long long>(commId));
      c.dead = true;
      return;
    }
    c.entry = e;
    c.state = S::Ready;
    Digest m = proof(e->token, 'L', commId, c.nl, c.nf);
    Writer w;
    w.bytes(m.data(), m.size());
    send(c, kWelcome, w.b);
    return;
  }
  Entry& e = *c.entry;
  Agreement& a = *e.a;
  if (c.state == S::AwaitChallenge) {  // follower side
    if (type != kChallenge) return bad();
    r.bytes(c.nl.data(), c.nl.size());
    if (!r.done()) return bad();
    auth::fillNonce(std::span<uint8_t, 16>(c.nf.data(), 16));
    Digest m = proof(e.token, 'F', a.commId(), c.nl, c.nf);
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
    if (!sameDigest(proof(e.token, 'L', a.commId(), c.nl, c.nf), mac)) {
      ICN_WARN(subsys::Tuning, "tuner: agreement: %s did not prove the rendezvous secret of comm 0x%llx; left",
               c.peer.c_str(), static_cast<unsigned long long>(a.commId()));
      return fail(c, "wrong secret");
    }
    c.state = S::Ready;
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: joined the agreement leader at %s",
             static_cast<unsigned long long>(a.commId()), c.peer.c_str());
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
      int sum = 0;  // followers of this communicator, including any authenticated in this round
      for (auto& f : e.followers) sum += f->dead ? 0 : f->members;
      for (auto& p : pending_)
        if (p && !p->dead && p->entry == &e && p->state == Conn::State::Ready) sum += p->members;
      a.onMembers(sum);
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

void Service::acceptAll() {
  for (int i = 0; i < 64 && listener_.valid(); ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
      auto add = [&](const Conn& c) {
        if (c.dead) return;
        short ev = POLLIN;
        if (!c.out.empty() || c.state == Conn::State::Connecting) ev |= POLLOUT;
        fds.push_back(pollfd{c.fd.get(), ev, 0});
      };
      for (auto& c : pending_) add(*c);
      for (auto& e : entries_) {
        for (auto& f : e->followers) add(*f);
        if (e->leader) add(*e->leader);
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
    acceptAll();
    auto now = Clock::now();
    auto serve = [&](Conn& c) {
      short ev = events.count(c.fd.get()) ? events[c.fd.get()] : 0;
      if (c.state == Conn::State::Connecting) {
        bool connected = false;
        if ((ev & (POLLOUT | POLLERR | POLLHUP)) && socketConnected(c.fd.get(), &connected, c.peer) != Status::Ok)
          return fail(c, "connect failed");
        if (!connected) {
          if (now > c.deadline) fail(c, "connect timed out");
          return;
        }
        c.state = Conn::State::AwaitChallenge;
        c.deadline = now + kHandshake;
      }
      if (ev & (POLLIN | POLLHUP | POLLERR)) readConn(c);
      if (c.state != Conn::State::Ready && now > c.deadline) fail(c, "handshake timed out");
      flush(c);
    };
    for (auto& c : pending_) serve(*c);
    // Authenticated connections move to their leader entry.
    for (auto& c : pending_)
      if (!c->dead && c->state == Conn::State::Ready && c->entry) c->entry->followers.push_back(std::move(c));
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](auto& c) { return !c || c->dead; }),
                   pending_.end());
    for (auto& e : entries_) {
      for (auto& f : e->followers) serve(*f);
      if (e->leader) serve(*e->leader);
      if (e->leader && e->leader->dead) e->leader.reset();
      step(*e);
    }
  }
}

}  // namespace

std::string rendezvousDir(std::string* why) {
  std::string dir = params::getStringNow(params::Id::TunerRendezvous);
  if (!dir.empty()) return privfile::ensureDir(dir, why) == Status::Ok ? dir : "";
  return privfile::runtimeDir(&dir, why) == Status::Ok ? dir : "";
}

bool attach(const std::shared_ptr<Agreement>& a, std::string* why) { return service().attach(a, why); }
void detach(const Agreement* a) { service().detach(a); }

}  // namespace icn::tuner::agree
