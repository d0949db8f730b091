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

std::chrono::milliseconds connectTimeout() {
  return std::chrono::milliseconds(params::getInt(params::Id::ConnectTimeoutMs));
}
}  // namespace

Handshake::Handshake(Fd fd, Role role, std::string peerName, Hello local, std::chrono::steady_clock::time_point start)
    : fd_(std::move(fd)), role_(role), peerName_(std::move(peerName)), local_(std::move(local)) {
  deadline_ = start + connectTimeout();
  if (role_ == Role::Acceptor && local_.fresh) {
    memcpy(nonceA_, local_.nonce, sizeof nonceA_);
    queue(FrameType::Challenge, nonceA_);
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

void Handshake::queue(FrameType type, std::span<const uint8_t> payload) {
  std::vector<uint8_t> frame = encodeFrame(type, payload);
  out_.insert(out_.end(), frame.begin(), frame.end());
}

void Handshake::confirm(std::vector<uint8_t> acceptorBlob) {
  if (confirmed_ || !helloReceived_) return;
  confirmed_ = true;
  if (role_ == Role::Acceptor) {
    local_.blob = std::move(acceptorBlob);
    local_.mac.clear();
    digestA_ = helloDigest(local_);
    Digest t = auth::tag(proofMessage('A', digestC_, digestA_));
    local_.mac.assign(t.begin(), t.end());
    queue(FrameType::Hello, encodeHello(local_));
    helloSent_ = true;
  } else {
    Digest t = auth::tag(proofMessage('R', digestC_, digestA_));
    std::vector<uint8_t> payload{static_cast<uint8_t>(t.size())};
    payload.insert(payload.end(), t.begin(), t.end());
    queue(FrameType::Ready, payload);
  }
}

Status Handshake::pump() {
  while (outOff_ < out_.size()) {
    ssize_t n = ::send(fd_.get(), out_.data() + outOff_, out_.size() - outOff_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      outOff_ += static_cast<size_t>(n);
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
  // Never more than one whole frame buffered: at the bound nothing is read (the kernel's buffer fills and the
  // peer's sends stall) until the frame is handled. Nothing is read once our part is over, and a frame the protocol
  // expects is read to its end and no further: the peer starts its stream the moment its part is over (the
  // acceptor on our READY, the connector once READY is out), and those bytes belong to the socket's next owner.
  // Bytes the protocol does not allow yet are read (up to the bound) and fail the handshake.
  while (!ourPartOver()) {
    const size_t left = peerMaySend() ? bytesToFrameEnd() : kMaxHandshakeInput - in_.size();
    if (left == 0) break;
    uint8_t buf[4096];
    ssize_t n = ::recv(fd_.get(), buf, std::min(sizeof buf, left), MSG_DONTWAIT);
    if (n > 0) {
      in_.insert(in_.end(), buf, buf + n);
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

bool Handshake::ourPartOver() const { return role_ == Role::Connector ? confirmed_ : readyDone_; }

size_t Handshake::bytesToFrameEnd() const {
  if (in_.size() < 12) return 12 - in_.size();
  FrameType type;
  uint32_t len;
  std::string why;
  // A bad header reads nothing more: progress() fails on it.
  if (decodeFrameHeader(std::span<const uint8_t, 12>(in_.data(), 12), &type, &len, &why) != Status::Ok) return 0;
  return in_.size() < 12 + size_t{len} ? 12 + size_t{len} - in_.size() : 0;
}

bool Handshake::peerMaySend() const {
  // The connector hears CHALLENGE and HELLO_A, nothing after. The acceptor hears HELLO_C, then nothing before its
  // own HELLO_A (sent at confirm), then READY, then nothing.
  if (role_ == Role::Connector) return !helloReceived_;
  return !helloReceived_ || (helloSent_ && !readyDone_);
}

Status Handshake::onChallenge(std::span<const uint8_t> payload) {
  if (role_ != Role::Connector || challenged_) return fail("unexpected CHALLENGE frame");
  if (payload.size() != sizeof nonceA_) return fail("malformed CHALLENGE frame (%zu bytes)", payload.size());
  memcpy(nonceA_, payload.data(), sizeof nonceA_);
  challenged_ = true;
  // Our HELLO answers this very challenge: its tag binds the acceptor's fresh nonce to every field we send.
  local_.mac.clear();
  digestC_ = helloDigest(local_);
  Digest t = auth::tag(proofMessage('C', nonceA_, digestC_));
  local_.mac.assign(t.begin(), t.end());
  queue(FrameType::Hello, encodeHello(local_));
  helloSent_ = true;
  return Status::Ok;
}

Status Handshake::onHello(std::span<const uint8_t> payload) {
  if (helloReceived_) return fail("unexpected second HELLO");
  if (role_ == Role::Connector && !challenged_) return fail("unexpected HELLO before the CHALLENGE");
  Hello h;
  std::string why;
  if (decodeHello(payload, &h, &why) != Status::Ok) return fail("%s", why.c_str());
  const std::string who = h.host + ":" + std::to_string(h.pid);
  if (h.transport != local_.transport)
    return fail("peer %s uses transport %s, we use %s (set ICN_TRANSPORT alike on all ranks)", who.c_str(),
                transportName(h.transport), transportName(local_.transport));
  // Checked before anyone parses the blob: a transport must never see an unverified peer payload.
  std::vector<uint8_t> got = std::move(h.mac);
  h.mac.clear();
  const Digest d = helloDigest(h);
  bool tagOk;
  if (role_ == Role::Acceptor) {
    tagOk = auth::verifyTag(proofMessage('C', nonceA_, d), got);
  } else {
    if (memcmp(h.nonce, nonceA_, sizeof nonceA_) != 0)
      return fail("HELLO from %s does not carry the nonce of its CHALLENGE (replayed or forged)", who.c_str());
    tagOk = auth::verifyTag(proofMessage('A', digestC_, d), got);
  }
  if (!tagOk && auth::enabled())
    return fail("peer %s did not prove knowledge of the job key (ICN_AUTH_KEY), or its HELLO was replayed or "
                "altered", who.c_str());
  if (!tagOk)
    return fail("HELLO from %s fails its integrity check (corrupt, replayed or altered, not an ICN peer, or "
                "ICN_AUTH_KEY is set there but not here)", who.c_str());
  if (local_.commId != 0 && h.commId != local_.commId)
    return fail("peer %s (rank %d) belongs to communicator 0x%llx, this %s 0x%llx: refused", who.c_str(), h.rank,
                static_cast<unsigned long long>(h.commId),
                role_ == Role::Acceptor ? "listener serves" : "connection is for",
                static_cast<unsigned long long>(local_.commId));
  h.mac = std::move(got);
  peer_ = std::move(h);
  if (role_ == Role::Acceptor) digestC_ = d;
  else digestA_ = d;
  peerName_ = who + " (" + peerName_ + ")";
  helloReceived_ = true;
  return Status::Ok;
}

Status Handshake::onReady(std::span<const uint8_t> payload) {
  // Only the acceptor receives READY, after its own HELLO.
  if (role_ != Role::Acceptor || !helloSent_ || readyDone_) return fail("unexpected READY frame");
  if (payload.empty() || payload.size() != 1u + payload[0]) return fail("malformed READY frame");
  if (!auth::verifyTag(proofMessage('R', digestC_, digestA_), payload.subspan(1))) {
    if (auth::enabled())
      return fail("peer %s:%u did not prove knowledge of the job key (ICN_AUTH_KEY) in READY", peer_.host.c_str(),
                  peer_.pid);
    return fail("READY from %s:%u fails its integrity check", peer_.host.c_str(), peer_.pid);
  }
  readyDone_ = true;
  return Status::Ok;
}

Status Handshake::onFrame(FrameType type, std::span<const uint8_t> payload) {
  switch (type) {
    case FrameType::Challenge: return onChallenge(payload);
    case FrameType::Hello: return onHello(payload);
    case FrameType::Ready: return onReady(payload);
  }
  return fail("unknown frame type %u", static_cast<unsigned>(type));
}

const char* Handshake::waitingFor() const {
  if (role_ == Role::Connector) {
    if (!challenged_) return "the CHALLENGE";
    if (!helloReceived_) return "the acceptor's HELLO";
    if (!confirmed_) return "our transport set-up";
    return "READY to be sent";
  }
  if (!helloReceived_) return "the connector's HELLO";
  if (!confirmed_) return "our transport set-up";
  return "READY";
}

Status Handshake::progress(Phase* phase) {
  *phase = Phase::InProgress;
  if (!fd_.valid()) return Status::RemoteError;
  if (!local_.fresh) return fail("no fresh nonce (the kernel's random source failed)");
  if (auth::init() != Status::Ok) return fail("the job key is unusable: %s", auth::problem().c_str());
  ICN_CHECK(pump());
  while (!in_.empty()) {
    if (!peerMaySend())
      return fail("%zu bytes after %s, where the protocol allows none", in_.size(),
                  readyDone_ ? "READY" : role_ == Role::Connector ? "its HELLO" : "its HELLO, before ours");
    if (in_.size() < 12) break;
    FrameType type;
    uint32_t len;
    std::string why;
    if (decodeFrameHeader(std::span<const uint8_t, 12>(in_.data(), 12), &type, &len, &why) != Status::Ok)
      return fail("%s", why.c_str());
    if (in_.size() < 12 + len) break;
    ICN_CHECK(onFrame(type, std::span<const uint8_t>(in_.data() + 12, len)));
    in_.erase(in_.begin(), in_.begin() + 12 + len);
    ICN_CHECK(pump());  // what the frame queued, and the next frame (reads stop at each frame's end)
  }
  ICN_CHECK(pump());  // what the frames just handled queued (our HELLO, READY)
  const bool flushed = out_.empty();
  const bool done = confirmed_ && flushed && (role_ == Role::Connector || readyDone_);
  if (done) {
    *phase = Phase::Done;
    return Status::Ok;
  }
  if (eof_)
    return fail("peer closed the connection during the handshake%s",
                role_ == Role::Connector ? " (if its log shows a refusal: ICN_AUTH_KEY must match on every rank)" : "");
  if (std::chrono::steady_clock::now() > deadline_)
    return fail("not completed within %lld ms (ICN_CONNECT_TIMEOUT_MS; waiting for %s)",
                static_cast<long long>(params::getInt(params::Id::ConnectTimeoutMs)), waitingFor());
  if (helloReceived_ && !confirmed_) *phase = Phase::PeerKnown;
  return Status::Ok;
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
  h.fresh = auth::fillNonce(h.nonce) == Status::Ok;
  h.blob = std::move(blob);
  return h;
}

}  // namespace icn
