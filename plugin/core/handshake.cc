#include "core/handshake.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>

#include "core/auth.h"
#include "core/coarse_clock.h"
#include "core/log.h"
#include "core/net_counters.h"
#include "core/params.h"

namespace icn {

namespace {
const char* transportName(uint8_t t) { return t == 1 ? "ucx" : t == 2 ? "ib" : t == 3 ? "tcp" : "?"; }
}  // namespace

Handshake::Handshake(Fd fd, Role role, std::string peerName, Hello local)
    : fd_(std::move(fd)), role_(role), peerName_(std::move(peerName)), local_(std::move(local)) {
  lastProgress_ = std::chrono::steady_clock::now();
  if (role_ == Role::Connector) {
    const uint8_t noNonce[16] = {};
    local_.mac = auth::helloTag('H', local_.nonce, noNonce, local_.blob);
    out_ = encodeFrame(FrameType::Hello, encodeHello(local_));
    helloSent_ = true;
  }
}

Status Handshake::fail(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ICN_WARN(subsys::Net, "handshake with %s failed: %s", peerName_.c_str(), msg);
  fd_.reset();
  return Status::RemoteError;
}

void Handshake::confirm(std::vector<uint8_t> acceptorBlob) {
  confirmed_ = true;
  std::vector<uint8_t> frame;
  if (role_ == Role::Acceptor) {
    local_.blob = std::move(acceptorBlob);
    local_.mac = auth::helloTag('A', peer_.nonce, local_.nonce, local_.blob);
    frame = encodeFrame(FrameType::Hello, encodeHello(local_));
    helloSent_ = true;
  } else {
    std::vector<uint8_t> mac = auth::mac('C', local_.nonce, peer_.nonce);
    std::vector<uint8_t> payload;
    payload.push_back(static_cast<uint8_t>(mac.size()));
    payload.insert(payload.end(), mac.begin(), mac.end());
    frame = encodeFrame(FrameType::Ready, payload);
  }
  out_.insert(out_.end(), frame.begin(), frame.end());
}

Status Handshake::pump() {
  while (outOff_ < out_.size()) {
    ssize_t n = ::send(fd_.get(), out_.data() + outOff_, out_.size() - outOff_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      outOff_ += static_cast<size_t>(n);
      lastProgress_ = std::chrono::steady_clock::now();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    return fail("send: %s", strerror(errno));
  }
  if (outOff_ == out_.size()) {
    out_.clear();
    outOff_ = 0;
  }
  for (;;) {
    uint8_t buf[4096];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in_.insert(in_.end(), buf, buf + n);
      lastProgress_ = std::chrono::steady_clock::now();
      if (in_.size() > kMaxFramePayload + 12) break;  // parse before reading more
      continue;
    }
    if (n == 0) {  // frames that arrived before the close still count (READY then close is legal)
      eof_ = true;
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    return fail("recv: %s", strerror(errno));
  }
  return Status::Ok;
}

Status Handshake::onFrame(FrameType type, std::span<const uint8_t> payload) {
  bool wantHello = !helloReceived_;
  if (type == FrameType::Hello) {
    if (!wantHello) return fail("unexpected second HELLO");
    std::string why;
    if (decodeHello(payload, &peer_, &why) != Status::Ok) return fail("%s", why.c_str());
    if (peer_.transport != local_.transport)
      return fail("peer %s:%u uses transport %s, we use %s (set ICN_TRANSPORT alike on all ranks)", peer_.host.c_str(),
                  peer_.pid, transportName(peer_.transport), transportName(local_.transport));
    // Checked before anyone parses the blob: a transport must never see an unverified peer payload.
    const uint8_t noNonce[16] = {};
    bool tagOk = role_ == Role::Connector ? auth::verifyHelloTag('A', local_.nonce, peer_.nonce, peer_.blob, peer_.mac)
                                          : auth::verifyHelloTag('H', peer_.nonce, noNonce, peer_.blob, peer_.mac);
    if (!tagOk && auth::enabled())
      return fail("peer %s:%u did not prove knowledge of the job key (ICN_AUTH_KEY)", peer_.host.c_str(), peer_.pid);
    if (!tagOk)
      return fail("HELLO from %s:%u fails its integrity check (corrupt, not an ICN peer, or ICN_AUTH_KEY is set there "
                  "but not here)", peer_.host.c_str(), peer_.pid);
    peerName_ = peer_.host + ":" + std::to_string(peer_.pid) + " (" + peerName_ + ")";
    helloReceived_ = true;
    return Status::Ok;
  }
  // READY: only the acceptor receives it, after its own HELLO.
  if (role_ != Role::Acceptor || !helloSent_) return fail("unexpected READY frame");
  if (payload.empty() || payload.size() != 1u + payload[0]) return fail("malformed READY frame");
  std::span<const uint8_t> mac = payload.subspan(1);
  if (auth::enabled()) {
    if (!auth::verify('C', peer_.nonce, local_.nonce, mac))
      return fail("peer %s:%u did not prove knowledge of the job key (ICN_AUTH_KEY)", peer_.host.c_str(), peer_.pid);
  } else if (!mac.empty()) {
    return fail("peer requires authentication but ICN_AUTH_KEY is not set here");
  }
  readyDone_ = true;
  return Status::Ok;
}

Status Handshake::progress(Phase* phase) {
  *phase = Phase::InProgress;
  if (!fd_.valid()) return Status::RemoteError;
  ICN_CHECK(pump());
  while (in_.size() >= 12) {
    FrameType type;
    uint32_t len;
    std::string why;
    if (decodeFrameHeader(std::span<const uint8_t, 12>(in_.data(), 12), &type, &len, &why) != Status::Ok)
      return fail("%s", why.c_str());
    if (in_.size() < 12 + len) break;
    ICN_CHECK(onFrame(type, std::span<const uint8_t>(in_.data() + 12, len)));
    in_.erase(in_.begin(), in_.begin() + 12 + len);
  }
  bool finished = helloReceived_ && (role_ == Role::Connector || readyDone_);
  if (eof_ && !finished)
    return fail("peer closed the connection during the handshake%s",
                role_ == Role::Connector ? " (if its log shows a refusal: ICN_AUTH_KEY must match on every rank)" : "");
  if (!helloReceived_) {
    auto idle = std::chrono::steady_clock::now() - lastProgress_;
    if (idle > std::chrono::milliseconds(params::getInt(params::Id::ConnectTimeoutMs)))
      return fail("no progress for %lld ms (ICN_CONNECT_TIMEOUT_MS)",
                  static_cast<long long>(params::getInt(params::Id::ConnectTimeoutMs)));
    return Status::Ok;
  }
  if (!confirmed_) {
    *phase = Phase::PeerKnown;
    return Status::Ok;
  }
  ICN_CHECK(pump());
  bool flushed = out_.empty();
  bool done = role_ == Role::Connector ? flushed : (flushed && readyDone_);
  if (done) {
    *phase = Phase::Done;
    return Status::Ok;
  }
  auto idle = std::chrono::steady_clock::now() - lastProgress_;
  if (idle > std::chrono::milliseconds(params::getInt(params::Id::ConnectTimeoutMs)))
    return fail("no progress for %lld ms after HELLO (ICN_CONNECT_TIMEOUT_MS)",
                static_cast<long long>(params::getInt(params::Id::ConnectTimeoutMs)));
  return Status::Ok;
}

namespace {
// After the handshake the control connection carries nothing but, at most, one failure notice:
// kFailureMagic, one length byte, then that many bytes of text.
constexpr uint8_t kFailureMagic = 0xF7;
}  // namespace

void ControlChannel::notifyFailure(const std::string& why) {
  if (notified_ || dead_ || !fd_.valid()) return;
  notified_ = true;
  uint8_t msg[2 + 255];
  const size_t n = std::min<size_t>(why.size(), 255);
  msg[0] = kFailureMagic;
  msg[1] = uint8_t(n);
  memcpy(msg + 2, why.data(), n);
  // Best effort: a full socket buffer or a dead peer just means the peer learns of it by the close instead.
  (void)!::send(fd_.get(), msg, 2 + n, MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd_.get(), SHUT_WR);
}

Status ControlChannel::checkAlive() {
  if (dead_) return Status::RemoteError;
  auto now = coarseNow();
  if (now - lastPoll_ < std::chrono::milliseconds(50)) return Status::Ok;
  lastPoll_ = now;
  pollfd p{fd_.get(), POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) == 0) return Status::Ok;
  std::string why = "peer closed its control connection (process exited or was killed)";
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) why = strerror(err);
  else if (p.revents & POLLIN) {
    uint8_t b[2 + 255];
    ssize_t n = ::recv(fd_.get(), b, sizeof b, MSG_DONTWAIT);
    if (n >= 2 && b[0] == kFailureMagic) {
      why = "peer reports: " + std::string(reinterpret_cast<const char*>(b + 2), std::min<size_t>(size_t(n) - 2, b[1]));
    } else if (n > 0) {
      why = "unexpected data on the control connection";
    }
  }
  dead_ = true;
  deadReason_ = why;
  ICN_WARN(subsys::Net, "peer %s is gone: %s", peerName_.c_str(), why.c_str());
  return Status::RemoteError;
}

NetCommInfo netCommInfo(const Hello& peer, uint64_t commId, bool isSend) {
  NetCommInfo info;
  info.commId = commId;
  info.localRank = netstats::localRank(commId);
  info.peerRank = peer.rank;
  info.peer = peer.host + ":" + std::to_string(peer.pid);
  info.isSend = isSend;
  return info;
}

Hello makeLocalHello(uint8_t transport, uint64_t commId, std::vector<uint8_t> blob) {
  Hello h;
  h.transport = transport;
  h.commId = commId;
  h.rank = netstats::localRank(commId);
  h.pid = static_cast<uint32_t>(getpid());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  h.host = host;
  auth::fillNonce(h.nonce);
  h.blob = std::move(blob);
  return h;
}

}  // namespace icn
