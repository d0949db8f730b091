// The agreement service's way to its peers: where the leader publishes its address (a rendezvous file in a
// shared directory, or a TCP rendezvous), how a follower finds and connects to it, and the listener's accept with
// its bounds on connections per source (a flood is refused and reported, never queued).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/auth.h"
#include "core/log.h"
#include "core/params.h"
#include "core/private_file.h"
#include "core/socket.h"
#include "tuner/agree/service.h"
#include "tuner/agree/service_impl.h"
#include "tuner/agree/wire.h"

namespace icn::tuner::agree {

bool Service::chooseRendezvous(int nNodes, bool* tcp, std::string* dir, std::string* why) {
  const std::string spec = params::getStringNow(params::Id::TunerRendezvous);
  // Ranks of one node share its runtime directory; only a communicator spanning nodes needs the network form.
  *tcp = nNodes > 1 && isNetworkRendezvous(spec);
  if (!*tcp) {
    *dir = rendezvousDir(why);
    return !dir->empty();
  }
  // A network address has no file permissions: the job key is what keeps strangers out, so without it nobody at
  // that address is trusted and the communicator keeps NCCL's choice.
  if (!auth::enabled()) {
    if (why)
      *why = "ICN_TUNER_RENDEZVOUS=" + spec + " needs the job key (ICN_AUTH_KEY or ICN_AUTH_KEY_FILE" +
             (auth::problem().empty() ? "" : ": " + auth::problem()) +
             "): a network rendezvous trusts nobody without it";
    return false;
  }
  return resolveRegistry(spec, why);
}

bool Service::publishLeader(Entry& e, std::string* why) {
  const Agreement& a = *e.a;
  if (!listener_.valid()) {
    SockAddr addr, bound;
    std::string ifname;
    if (pickInterface(&addr, &ifname) != Status::Ok || listenOn(addr, &listener_, &bound) != Status::Ok) {
      if (why) *why = "no address to listen on for the agreement";
      return false;
    }
    listenAddr_ = bound.str();
  }
  if (e.tcp) {  // registered by its registry client (stepRegistryClient)
    ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement leader at %s (registry %s, job key)",
             static_cast<unsigned long long>(a.commId()), listenAddr_.c_str(), registryAddr_.str().c_str());
    return true;
  }
  auth::fillNonce(std::span<uint8_t, 16>(e.token.data(), 16));
  auth::fillNonce(std::span<uint8_t, 16>(e.token.data() + 16, 16));
  std::string text = "icn-agree " + std::to_string(kProtocol) + "\naddr " + listenAddr_ + "\ntoken " +
                     hex(e.token.data(), e.token.size()) + "\n";
  if (privfile::writeAtomic(e.file, text, false, why) != Status::Ok) return false;
  e.fileText = text;
  e.nextFileCheck = Clock::now() + kFileCheckEvery;
  ICN_INFO(subsys::Tuning, "tuner: comm 0x%llx: agreement leader at %s (rendezvous %s)",
           static_cast<unsigned long long>(a.commId()), listenAddr_.c_str(), e.file.c_str());
  return true;
}

void Service::lookForLeader(Entry& e) {
  Agreement& a = *e.a;
  SockAddr sa;
  if (e.tcp) {
    stepRegistryClient(e);
    if (e.leader || a.frozen() || e.contested || e.found.empty() || Clock::now() < e.nextLook) return;
    // The registry's word is only a hint: the leader still has to prove the communicator's secret. The lookup stays
    // open until START, for the registry to say if another process claims the leader's place meanwhile; the
    // address stays too, for another try where a connection failed.
    if (parseAddr(e.found, &sa)) connectLeader(e, e.found, sa);
    return;
  }
  if (e.leader || a.frozen() || Clock::now() < e.nextLook) return;
  e.nextLook = Clock::now() + kLookEvery;
  std::string addr;
  if (readRendezvousFile(e, &addr, &sa)) connectLeader(e, addr, sa);
}

bool Service::readRendezvousFile(Entry& e, std::string* addr, SockAddr* sa) {
  int fd = open(e.file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  Fd file(fd);
  struct stat st {};
  char buf[512] = {};
  ssize_t n = 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || st.st_size >= 512 ||
      (n = read(fd, buf, sizeof buf - 1)) <= 0) {
    if (!e.warnedStale)
      ICN_WARN(subsys::Tuning, "tuner: agreement: %s is not a rendezvous file of ours; ignored", e.file.c_str());
    e.warnedStale = true;
    return false;
  }
  std::string text(buf, static_cast<size_t>(n)), token;
  size_t at = 0;
  bool header = false;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    if (line == "icn-agree " + std::to_string(kProtocol)) header = true;
    if (line.rfind("addr ", 0) == 0) *addr = line.substr(5);
    if (line.rfind("token ", 0) == 0) token = line.substr(6);
  }
  return header && parseAddr(*addr, sa) && unhex(token, e.token.data(), e.token.size());  // else being written
}

void Service::connectLeader(Entry& e, const std::string& addr, const SockAddr& sa) {
  auto c = std::make_unique<Conn>();
  if (startConnect(sa, &c->fd) != Status::Ok) return;
  c->peer = addr;
  c->state = Conn::State::Connecting;
  c->deadline = Clock::now() + kConnect;
  c->entry = &e;
  e.leader = std::move(c);
}

bool Service::makeRoom(const std::string& source, Clock::time_point now) {
  int live = 0, fromSource = 0;
  Conn *oldest = nullptr, *oldestHere = nullptr;
  for (auto& p : pending_) {
    if (!p || p->dead || p->state == Conn::State::Ready) continue;  // proven ones leave pending_ this round
    ++live;
    bool here = p->source == source;
    fromSource += here ? 1 : 0;
    if (now - p->born < kFloodGrace) continue;  // too young to have failed a handshake
    if (!oldest || p->born < oldest->born) oldest = p.get();
    if (here && (!oldestHere || p->born < oldestHere->born)) oldestHere = p.get();
  }
  Conn* evict = fromSource >= kMaxPendingPerSource ? oldestHere : live >= kMaxPending ? oldest : nullptr;
  if (!evict) return fromSource < kMaxPendingPerSource && live < kMaxPending;
  evict->dead = true;
  noteFlood(evict->source, now);
  return true;
}

void Service::noteFlood(const std::string& source, Clock::time_point now) {
  auto it = flood_.find(source);
  if (it != flood_.end())
    ++it->second;
  else if (flood_.size() < 16)
    flood_.emplace(source, 1);
  else
    ++floodOthers_;
  if (floodFirst_ == Clock::time_point{}) floodFirst_ = now;
  reportFlood(now);
}

void Service::reportFlood(Clock::time_point now) {
  uint64_t total = floodOthers_;
  for (auto& [src, n] : flood_) total += n;
  // One line a second at most, the first once the drops add up (a lone one may be a follower's slow handshake).
  if (total == 0 || now < floodNext_ || (total < kFloodReportAt && now - floodFirst_ < kFloodReportEvery)) return;
  std::string from;
  for (auto& [src, n] : flood_) from += (from.empty() ? "" : ", ") + src + ": " + std::to_string(n);
  if (floodOthers_) from += ", others: " + std::to_string(floodOthers_);
  ICN_WARN(subsys::Tuning, "tuner: agreement: %llu connections that had not proven the secret dropped or refused "
           "(%s; at most %d pending, %d from one address): someone floods the agreement port; the oldest unproven "
           "ones make room, so followers still get in", static_cast<unsigned long long>(total), from.c_str(),
           kMaxPending, kMaxPendingPerSource);
  flood_.clear();
  floodOthers_ = 0;
  floodFirst_ = {};
  floodNext_ = now + kFloodReportEvery;
}

void Service::acceptAll(Fd& listener, Conn::Kind kind) {
  auto now = Clock::now();
  for (int i = 0; i < 64 && listener.valid(); ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = accept4(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_unique<Conn>();
    c->fd.reset(fd);
    SockAddr a;
    memcpy(&a.storage, &ss, len);
    a.len = len;
    c->peer = a.str();
    c->source = c->peer.substr(0, c->peer.rfind(':'));
    if (!makeRoom(c->source, now)) {
      noteFlood(c->source, now);
      continue;  // closed with c
    }
    c->born = now;
    c->kind = kind;
    c->state = Conn::State::AwaitHello;
    c->deadline = now + kHandshake;
    auth::fillNonce(std::span<uint8_t, 16>(c->nl.data(), 16));
    Writer w;
    w.bytes(c->nl.data(), c->nl.size());
    send(*c, kChallenge, w.b);
    flush(*c);
    pending_.push_back(std::move(c));
  }
}

void Service::checkFile(Entry& e) {
  Agreement& a = *e.a;
  if (e.tcp || a.frozen() || a.start() != Agreement::kNever || a.inFlight() || Clock::now() < e.nextFileCheck) return;
  e.nextFileCheck = Clock::now() + kFileCheckEvery;
  std::string text;
  int fd = open(e.file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    Fd file(fd);
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) text.assign(buf, static_cast<size_t>(n));
  }
  if (text == e.fileText) return;
  // Another process wrote the leader's file: it claims rank 0 too, and followers reading the file now go there.
  // Before START nobody runs a tuned call, so stopping now keeps every process of this leader on NCCL's choice.
  std::string other = "nobody";
  size_t at = text.find("\naddr ");
  if (at != std::string::npos) other = text.substr(at + 6, text.find('\n', at + 1) - at - 6);
  std::string why = "the rendezvous file " + e.file + " now names " + other +
                    " as the leader: another process claims rank 0";
  ICN_WARN(subsys::Tuning, "tuner: comm 0x%llx: %s; the agreement stops", static_cast<unsigned long long>(a.commId()),
           why.c_str());
  a.stop(why.c_str());
}

}  // namespace icn::tuner::agree
