#include "core/oob.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

#include "core/auth.h"
#include "core/log.h"
#include "core/params.h"
#include "core/wire.h"

namespace icn {

namespace {
constexpr uint32_t kHandleMagic = 0x49434e48;  // "ICNH"
std::mutex g_pendingMu;
std::unordered_set<const void*> g_pending;
}  // namespace

void pending_registry::add(const void* p) {
  std::lock_guard lk(g_pendingMu);
  g_pending.insert(p);
}

bool pending_registry::remove(const void* p) {
  std::lock_guard lk(g_pendingMu);
  return g_pending.erase(p) == 1;
}

Status writeListenHandle(HandleBytes handle, uint8_t transport, const SockAddr& addr) {
  std::fill(handle.begin(), handle.end(), 0);
  WireWriter w;
  w.put<uint32_t>(kHandleMagic);
  w.put<uint8_t>(transport);
  w.put<uint8_t>(static_cast<uint8_t>(kWireVersion));
  w.put<uint16_t>(static_cast<uint16_t>(addr.len));
  const auto* raw = reinterpret_cast<const uint8_t*>(&addr.storage);
  w.bytes({raw, addr.len});
  auto& b = w.buffer();
  if (b.size() > kHandleScratchOffset) return Status::InternalError;
  memcpy(handle.data(), b.data(), b.size());
  return Status::Ok;
}

Status readListenHandle(HandleBytes handle, uint8_t transport, SockAddr* addr, std::string* why) {
  WireReader r(std::span<const uint8_t>(handle.data(), kHandleScratchOffset));
  uint32_t magic = 0;
  uint8_t t = 0, version = 0;
  uint16_t len = 0;
  std::span<const uint8_t> raw;
  if (!r.get(&magic) || magic != kHandleMagic) {
    *why = "handle was not produced by ICN's listen() (bad magic)";
    return Status::InvalidArgument;
  }
  r.get(&t);
  r.get(&version);
  r.get(&len);
  if (t != transport) {
    auto name = [](uint8_t x) { return x == kTransportIb ? "ib" : x == kTransportUcx ? "ucx" : x == kTransportTcp ? "tcp" : "?"; };
    *why = std::string("handle is for transport ") + name(t) + ", this rank uses " + name(transport) +
           " (set ICN_TRANSPORT alike everywhere)";
    return Status::InvalidArgument;
  }
  if (version != kWireVersion || (len != sizeof(sockaddr_in) && len != sizeof(sockaddr_in6)) || !r.bytes(len, &raw)) {
    *why = "handle carries an unsupported version or address";
    return Status::InvalidArgument;
  }
  memset(&addr->storage, 0, sizeof addr->storage);
  memcpy(&addr->storage, raw.data(), len);
  addr->len = len;
  if (addr->family() != AF_INET && addr->family() != AF_INET6) {
    *why = "handle carries an unknown address family";
    return Status::InvalidArgument;
  }
  return Status::Ok;
}

namespace {
// A job key that is configured but unusable fails every listen and connect, so NCCL reports an error instead
// of the job running unauthenticated (the key's own WARN, logged once, says why).
Status keyUsable(const char* what) {
  if (auth::init() == Status::Ok) return Status::Ok;
  ICN_WARN(subsys::Net, "%s refused: %s", what, auth::problem().c_str());
  return Status::InvalidArgument;
}

// accept() errors that say nothing about the listening socket: a connection that died in the queue, or a
// shortage that passes (descriptors, buffers). The next poll() tries again.
bool acceptErrorIsTemporary(int e) {
  switch (e) {
    case EAGAIN: case EINTR: case ECONNABORTED: case EPROTO: case ENETDOWN: case ENOPROTOOPT: case EHOSTDOWN:
    case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH: case EPERM: case EMFILE: case ENFILE:
    case ENOBUFS: case ENOMEM:
      return true;
    default:
      return e == EWOULDBLOCK;
  }
}
}  // namespace

size_t maxSetupsPerListener() {
  static_assert(params::minOf(params::Id::ListenMaxSetups) >= 1);
  return static_cast<size_t>(params::getInt(params::Id::ListenMaxSetups));
}

Status OobListener::open(uint8_t transport, uint64_t commId, size_t socketsPerConnection, HandleBytes handle,
                         std::unique_ptr<OobListener>* out) {
  ICN_CHECK(keyUsable("listen"));
  auto l = std::make_unique<OobListener>();
  std::string ifname;
  SockAddr want;
  ICN_CHECK(pickInterface(&want, &ifname));
  ICN_CHECK(listenOn(want, &l->fd_, &l->addr_));
  ICN_CHECK(writeListenHandle(handle, transport, l->addr_));
  l->transport_ = transport;
  l->commId_ = commId;
  l->ledger_ = std::make_unique<SetupLedger>(l->addr_.str(), maxSetupsPerListener(), socketsPerConnection);
  ICN_TRACE(subsys::Net, "listening on %s (%s)", l->addr_.str().c_str(), ifname.c_str());
  *out = std::move(l);
  return Status::Ok;
}

Status OobListener::openAt(uint8_t transport, uint64_t commId, size_t socketsPerConnection, const SockAddr& addr,
                           std::unique_ptr<OobListener>* out) {
  ICN_CHECK(keyUsable("listen"));
  auto l = std::make_unique<OobListener>();
  ICN_CHECK(listenOn(addr, &l->fd_, &l->addr_));
  l->transport_ = transport;
  l->commId_ = commId;
  l->ledger_ = std::make_unique<SetupLedger>(l->addr_.str(), maxSetupsPerListener(), socketsPerConnection);
  *out = std::move(l);
  return Status::Ok;
}

Status OobListener::addAddress(const SockAddr& addr, SockAddr* bound) {
  if (extra_.size() >= kMaxExtraAddresses) return Status::InvalidArgument;
  Fd fd;
  SockAddr at;
  ICN_CHECK(listenOn(addr, &fd, &at));
  extra_.emplace_back(std::move(fd), at);
  *bound = at;
  ICN_TRACE(subsys::Net, "listening on %s too", at.str().c_str());
  return Status::Ok;
}

Status OobListener::acceptSome() {
  ICN_CHECK(acceptSome(fd_.get(), addr_));
  for (auto& [fd, at] : extra_) ICN_CHECK(acceptSome(fd.get(), at));
  return Status::Ok;
}

Status OobListener::acceptSome(int listenFd, const SockAddr& where) {
  for (int n = 0; n < kAcceptsPerPoll; n++) {
    SockAddr peer;
    peer.len = sizeof peer.storage;
    int fd = ::accept4(listenFd, reinterpret_cast<sockaddr*>(&peer.storage), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (!acceptErrorIsTemporary(e)) {
        ICN_WARN(subsys::Net, "accept on %s: %s", where.str().c_str(), strerror(e));
        return Status::SystemError;
      }
      if ((e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) && !outOfFds_) {
        outOfFds_ = true;
        ICN_WARN(subsys::Net, "accept on %s: %s; the connection waits in the kernel's queue and is retried at the "
                 "next accept (raise `ulimit -n`?)", where.str().c_str(), strerror(e));
      }
      return Status::Ok;
    }
    outOfFds_ = false;
    Fd conn(fd);
    setLivenessOptions(fd);
    const std::string name = peer.str();
    auto p = std::make_unique<Pending>();
    p->slot = ledger_->admit(addressWithoutPort(name), name);
    if (p->slot->evicted()) continue;  // the budget went to older set-ups of other addresses; conn closes here
    p->hs = std::make_unique<Handshake>(std::move(conn), Handshake::Role::Acceptor, name,
                                        makeLocalHello(transport_, commId_, {}));
    Pending* raw = p.get();
    p->slot->onEvict([raw] { raw->hs.reset(); });
    pending_.push_back(std::move(p));
  }
  return Status::Ok;
}

size_t OobListener::provenWaiting() const {
  size_t n = 0;
  for (auto& p : pending_) n += p->hs && p->hs->peerProven();
  return n;
}

Status OobListener::poll(size_t room, std::vector<AcceptedHandshake>* ready) {
  ready->clear();
  ICN_CHECK(acceptSome());
  std::vector<size_t> proven;  // indexes into pending_, oldest first
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = *pending_[i];
    Handshake::Phase phase;
    // An evicted handshake is already closed; a failed one was logged with the peer's name.
    if (!p.hs || p.hs->progress(&phase) != Status::Ok) {
      pending_.erase(pending_.begin() + static_cast<long>(i));
      continue;
    }
    if (phase == Handshake::Phase::PeerKnown) {
      p.slot->rename(p.hs->peerName());
      proven.push_back(i);
    }
    i++;
  }
  // The newest get the room: when the caller has little, a flood's older proven entries are the ones left waiting.
  // They are handed over oldest first (a TCP connection's control handshake before its lanes').
  const size_t skip = proven.size() > room ? proven.size() - room : 0;
  for (size_t k = skip; k < proven.size(); k++) {
    Pending& p = *pending_[proven[k]];
    p.slot->onEvict(nullptr);  // the new owner sets its own
    ready->push_back({std::move(p.hs), std::move(p.slot)});
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const auto& p) { return !p->hs; }),
                 pending_.end());
  return Status::Ok;
}

Status OobConnector::start(HandleBytes handle, uint8_t transport, Hello hello, std::unique_ptr<OobConnector>* out) {
  ICN_CHECK(keyUsable("connect"));
  SockAddr addr;
  std::string why;
  if (readListenHandle(handle, transport, &addr, &why) != Status::Ok) {
    ICN_WARN(subsys::Net, "connect: %s", why.c_str());
    return Status::InvalidArgument;
  }
  return startTo(addr, nullptr, std::move(hello), out);
}

Status OobConnector::startTo(const SockAddr& addr, const SockAddr* source, Hello hello,
                             std::unique_ptr<OobConnector>* out, bool probe) {
  ICN_CHECK(keyUsable("connect"));
  auto c = std::make_unique<OobConnector>();
  c->peerName_ = addr.str();
  c->failLevel_ = probe ? LogLevel::Info : LogLevel::Warn;
  ICN_CHECK(startConnect(addr, &c->fd_, source, c->failLevel_));
  setLivenessOptions(c->fd_.get());
  c->hello_ = std::move(hello);
  c->started_ = std::chrono::steady_clock::now();
  *out = std::move(c);
  return Status::Ok;
}

Status OobConnector::progress(Handshake::Phase* phase) {
  *phase = Handshake::Phase::InProgress;
  if (!hs_) {
    bool connected = false;
    ICN_CHECK(socketConnected(fd_.get(), &connected, peerName_, failLevel_));
    if (!connected) {
      long long limit = params::getInt(params::Id::ConnectTimeoutMs);
      if (std::chrono::steady_clock::now() - started_ > std::chrono::milliseconds(limit)) {
        logf(failLevel_, subsys::Net, __FILE__, __LINE__,
             "connect to %s: no answer within %lld ms (ICN_CONNECT_TIMEOUT_MS)", peerName_.c_str(), limit);
        return Status::RemoteError;
      }
      return Status::Ok;
    }
    hs_ = std::make_unique<Handshake>(std::move(fd_), Handshake::Role::Connector, peerName_, std::move(hello_), started_);
  }
  return hs_->progress(phase);
}

}  // namespace icn
