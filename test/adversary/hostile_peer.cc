#include "hostile_peer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "core/auth.h"
#include "core/oob.h"
#include "core/wire.h"
#include "leak_check.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::adversary {
namespace {
using Clock = std::chrono::steady_clock;

int remainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

constexpr uint64_t kWireupTag = uint64_t{1} << 63;  // what ICN's UCX transport uses for its wire-up probe
}  // namespace

uint8_t transportUnderTest() {
  const std::string t = getenv("ICN_TRANSPORT") ? getenv("ICN_TRANSPORT") : "";
  return t == "tcp" ? kTransportTcp : t == "ib" ? kTransportIb : kTransportUcx;
}

size_t setupBudget(size_t maxSetups) {
  return maxSetups * (transportUnderTest() == kTransportTcp ? 2 + kTcpStreams : 1);
}

std::vector<std::pair<std::string, std::string>> withSmallSetupCap(std::vector<std::pair<std::string, std::string>> env) {
  env.push_back({"ICN_LISTEN_MAX_SETUPS", std::to_string(kSmallSetupCap)});
  env.push_back({"ICN_TCP_STREAMS", std::to_string(kTcpStreams)});
  return env;
}

SockAddr listenAddress(const void* handle) {
  std::array<uint8_t, kHandleSize> h;
  memcpy(h.data(), handle, h.size());
  SockAddr a;
  std::string why;
  if (readListenHandle(h, transportUnderTest(), &a, &why) != Status::Ok) a.len = 0;
  return a;
}

namespace {
std::string g_source;
pid_t g_sourcePid = 0;  // the process g_source belongs to (a forked rank announces its own)

// The address part of "1.2.3.4:port" / "[v6]:port".
std::string withoutPort(const std::string& s) { return s.substr(0, s.rfind(':')); }

}  // namespace

void announceSource(int fd) {
  SockAddr local;
  local.len = sizeof local.storage;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.len) != 0) return;
  std::string a = withoutPort(local.str());
  if (a == g_source && g_sourcePid == getpid()) return;
  g_source = a;
  g_sourcePid = getpid();
  fprintf(stderr, "adversary: hostile connection from %s\n", a.c_str());
  fflush(stderr);
}

const std::string& hostileSourceAddress() { return g_source; }

WirePeer::WirePeer(const SockAddr& to) {
  if (to.len == 0) return;
  int fd = ::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  if (::connect(fd, to.sa(), to.len) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (::poll(&p, 1, 5000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    ::close(fd);
    return;
  }
  fd_ = fd;
  announceSource(fd);
}

WirePeer::~WirePeer() { close(); }

void WirePeer::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<Frame> WirePeer::readFrame(Ms limit) {
  auto deadline = Clock::now() + limit;
  for (;;) {
    if (in_.size() >= 12) {
      WireReader r(std::span<const uint8_t>(in_.data(), 12));
      uint32_t magic = 0, len = 0;
      uint16_t version = 0, type = 0;
      r.get(&magic), r.get(&version), r.get(&type), r.get(&len);
      if (len <= kMaxFramePayload && in_.size() >= 12 + len) {
        Frame f{type, std::vector<uint8_t>(in_.begin() + 12, in_.begin() + 12 + len)};
        in_.erase(in_.begin(), in_.begin() + 12 + len);
        return f;
      }
    }
    pollfd p{fd_, POLLIN, 0};
    if (fd_ < 0 || ::poll(&p, 1, remainingMs(deadline)) != 1) return std::nullopt;
    uint8_t buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return std::nullopt;
    if (n > 0) in_.insert(in_.end(), buf, buf + n);
  }
}

std::optional<Nonce> WirePeer::readChallenge(Ms limit) {
  auto f = readFrame(limit);
  if (!f || f->type != static_cast<uint16_t>(FrameType::Challenge) || f->payload.size() != 16) return std::nullopt;
  Nonce n;
  memcpy(n.data(), f->payload.data(), 16);
  return n;
}

bool WirePeer::send(std::span<const uint8_t> bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    pollfd p{fd_, POLLOUT, 0};
    if (fd_ < 0 || ::poll(&p, 1, 5000) != 1) return false;
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) off += size_t(n);
    else if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return true;
}

size_t WirePeer::trickle(std::span<const uint8_t> bytes, Ms gap) {
  size_t sent = 0;
  for (uint8_t b : bytes) {
    if (closedByListener(Ms(0))) break;
    if (!send({&b, 1})) break;
    sent++;
    usleep(unsigned(gap.count() * 1000));
  }
  return sent;
}

bool WirePeer::closedByListener(Ms limit) {
  auto deadline = Clock::now() + limit;
  for (;;) {
    uint8_t buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    if (n > 0) continue;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, remainingMs(deadline)) != 1) return false;
  }
}

std::vector<uint8_t> tagWith(const std::string& key, char kind, std::span<const uint8_t> first,
                             std::span<const uint8_t> second) {
  std::vector<uint8_t> msg = proofMessage(kind, first, second);
  Digest d = key.empty() ? sha256(msg)
                         : hmacSha256({reinterpret_cast<const uint8_t*>(key.data()), key.size()}, msg);
  return {d.begin(), d.end()};
}

Hello connectorHello(uint64_t commId, std::vector<uint8_t> blob) {
  Hello h = makeLocalHello(transportUnderTest(), commId, std::move(blob));
  h.host = "rogue-peer";
  h.rank = 1;
  return h;
}

void tagConnectorHello(Hello* h, const Nonce& nonceA, const std::string& key) {
  h->mac.clear();
  Digest d = helloDigest(*h);
  h->mac = tagWith(key, 'C', nonceA, d);
}

std::vector<uint8_t> helloFrame(const Hello& h) { return encodeFrame(FrameType::Hello, encodeHello(h)); }

std::vector<uint8_t> ucxBlob(std::span<const uint8_t> workerAddress) {
  WireWriter w;
  w.put<uint32_t>(uint32_t(workerAddress.size()));
  w.bytes(workerAddress);
  return std::move(w.buffer());
}

std::vector<uint8_t> junkBlob() {
  if (transportUnderTest() == kTransportTcp) return std::vector<uint8_t>(24, 0xEE);
  if (transportUnderTest() == kTransportIb) return std::vector<uint8_t>(64, 0xEE);
  return ucxBlob(std::vector<uint8_t>(64, 0xEE));
}

std::vector<uint8_t> acceptableBlob() {
  if (transportUnderTest() == kTransportTcp) {
    tcp::Blob b;
    b.kind = tcp::kBlobControl;
    auth::fillNonce(std::span<uint8_t, 16>(b.token, 16));
    return tcp::encodeBlob(b);
  }
  if (transportUnderTest() == kTransportIb) return {};  // needs a live QP: the ib cases use IbRogue
  return ucxBlob(UcxRogue::realWorkerAddress());
}

// ---- UcxRogue ------------------------------------------------------------------------------------------------

namespace {
bool makeWorker(ucp_context_h* ctx, ucp_worker_h* worker, std::vector<uint8_t>* address) {
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_TAG;
  if (ucp_init(&p, nullptr, ctx) != UCS_OK) return false;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucp_worker_create(*ctx, &wp, worker) != UCS_OK) return false;
  ucp_address_t* a = nullptr;
  size_t len = 0;
  if (ucp_worker_get_address(*worker, &a, &len) != UCS_OK) return false;
  address->assign(reinterpret_cast<uint8_t*>(a), reinterpret_cast<uint8_t*>(a) + len);
  ucp_worker_release_address(*worker, a);
  return true;
}
}  // namespace

std::vector<uint8_t> UcxRogue::realWorkerAddress() {
  static UcxRogue r;  // alive (never progressed) for the rest of the process
  static std::vector<uint8_t> a;
  if (a.empty()) makeWorker(&r.ctx_, &r.worker_, &a);
  return a;
}

UcxRogue::~UcxRogue() {
  if (ep_) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    wait(ucp_ep_close_nbx(ep_, &p), Ms(1000));
  }
  if (worker_) ucp_worker_destroy(worker_);
  if (ctx_) ucp_cleanup(ctx_);
}

bool UcxRogue::wait(ucs_status_ptr_t req, Ms limit) {
  if (req == nullptr) return true;
  if (UCS_PTR_IS_ERR(req)) return false;
  auto deadline = Clock::now() + limit;
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && Clock::now() < deadline)
    ucp_worker_progress(worker_);
  if (st == UCS_INPROGRESS) ucp_request_cancel(worker_, req);
  ucp_request_free(req);
  return st == UCS_OK;
}

std::unique_ptr<UcxRogue> UcxRogue::connect(const SockAddr& to, uint64_t commId, Ms limit, std::string* why) {
  std::unique_ptr<UcxRogue> r(new UcxRogue());
  std::vector<uint8_t> address;
  if (!makeWorker(&r->ctx_, &r->worker_, &address)) {
    *why = "cannot create a UCX worker";
    return nullptr;
  }
  WirePeer tcp(to);
  if (!tcp.ok()) {
    *why = "cannot connect to the listener";
    return nullptr;
  }
  int fd = tcp.fd();
  Hello hello = connectorHello(commId, ucxBlob(address));
  Handshake hs(Fd(::dup(fd)), Handshake::Role::Connector, "victim", hello);
  tcp.close();
  ucs_status_ptr_t probeIn = nullptr, probeOut = nullptr, flush = nullptr;
  bool confirmed = false;
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    ucp_worker_progress(r->worker_);
    Handshake::Phase phase;
    if (hs.progress(&phase) != Status::Ok) {
      *why = "handshake refused";
      return nullptr;
    }
    if (phase == Handshake::Phase::Done) {
      r->control_ = hs.takeFd();
      return r;
    }
    if (phase == Handshake::Phase::PeerKnown && !r->ep_) {
      WireReader rd(hs.peer().blob);
      uint32_t len = 0;
      std::span<const uint8_t> addr;
      if (!rd.get(&len) || !rd.bytes(len, &addr)) {
        *why = "victim sent a malformed blob";
        return nullptr;
      }
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
      ep.address = reinterpret_cast<const ucp_address_t*>(addr.data());
      ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      // Tests keep rogue endpoints open until their rank exits; UCX allocates an endpoint in its own mmap'd pool,
      // which LeakSanitizer does not scan, so the endpoint's malloc'd part would look leaked at the rank's check.
      icn::test::LeakCheckDisabled keptOpenToTheEnd;
      if (ucp_ep_create(r->worker_, &ep, &r->ep_) != UCS_OK) {
        *why = "ucp_ep_create failed";
        return nullptr;
      }
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      probeIn = ucp_tag_recv_nbx(r->worker_, nullptr, 0, kWireupTag, ~uint64_t{0}, &p);
      ucp_request_param_t q{};
      probeOut = ucp_tag_send_nbx(r->ep_, nullptr, 0, kWireupTag, &q);
      flush = ucp_ep_flush_nbx(r->ep_, &q);
    }
    if (r->ep_ && !confirmed) {
      auto settled = [](ucs_status_ptr_t& q) {
        if (q == nullptr || UCS_PTR_IS_ERR(q)) return true;
        if (ucp_request_check_status(q) == UCS_INPROGRESS) return false;
        ucp_request_free(q);
        q = nullptr;
        return true;
      };
      bool a = settled(probeIn), b = settled(probeOut), c = settled(flush);
      if (a && b && c) {
        hs.confirm();
        confirmed = true;
      }
    }
  }
  *why = "handshake or wire-up did not finish in time";
  return nullptr;
}

bool UcxRogue::send(const void* data, size_t len, uint64_t tag, Ms limit) {
  ucp_request_param_t p{};
  return wait(ucp_tag_send_nbx(ep_, data, len, tag, &p), limit);
}

// ---- TcpRogue ----------------------------------------------------------------------------------------------

std::unique_ptr<TcpRogue> TcpRogue::connect(const SockAddr& to, uint64_t commId, Ms limit, std::string* why,
                                            int helperLanes) {
  std::unique_ptr<TcpRogue> r(new TcpRogue());
  tcp::Blob control;
  control.kind = tcp::kBlobControl;  // eager limit 0: no small eager messages
  control.value = static_cast<uint16_t>(helperLanes);
  auth::fillNonce(std::span<uint8_t, 16>(control.token, 16));
  auto start = [&](const tcp::Blob& b) -> std::unique_ptr<Handshake> {
    WirePeer p(to);
    if (!p.ok()) return nullptr;
    return std::make_unique<Handshake>(Fd(::dup(p.fd())), Handshake::Role::Connector, "victim",
                                       connectorHello(commId, tcp::encodeBlob(b)));
  };
  std::unique_ptr<Handshake> hs = start(control);
  if (!hs) {
    *why = "cannot connect to the listener";
    return nullptr;
  }
  std::vector<std::unique_ptr<Handshake>> laneHs;  // lane 0 first, once the listener has answered
  std::vector<Fd> lanes;
  bool controlConfirmed = false;
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    Handshake::Phase phase, lanePhase;
    if (hs->progress(&phase) != Status::Ok) {
      *why = "control handshake refused";
      return nullptr;
    }
    if (phase == Handshake::Phase::Done && !lanes.empty()) {  // we confirm only once every lane is ours
      r->control_ = hs->takeFd();
      r->lane0_ = std::move(lanes[0]);
      for (size_t i = 1; i < lanes.size(); i++) r->helpers_.push_back(std::move(lanes[i]));
      return r;
    }
    if (phase == Handshake::Phase::PeerKnown && lanes.empty()) {
      tcp::Blob answer;  // the lanes the listener grants
      if (tcp::decodeBlob(hs->peer().blob, &answer, why) != Status::Ok) return nullptr;
      for (uint16_t i = 0; i <= answer.value; i++) {
        tcp::Blob lane = control;
        lane.kind = tcp::kBlobLane;
        lane.value = i;
        laneHs.push_back(start(lane));
        if (!laneHs.back()) {
          *why = "cannot open lane " + std::to_string(i);
          return nullptr;
        }
      }
      lanes.resize(laneHs.size());
    }
    bool allLanes = !lanes.empty();
    for (size_t i = 0; i < laneHs.size(); i++) {
      if (laneHs[i]) {
        if (laneHs[i]->progress(&lanePhase) != Status::Ok) {
          *why = "lane handshake refused";
          return nullptr;
        }
        if (lanePhase == Handshake::Phase::PeerKnown) laneHs[i]->confirm();
        if (lanePhase == Handshake::Phase::Done) {
          lanes[i] = laneHs[i]->takeFd();
          laneHs[i].reset();
        }
      }
      allLanes = allLanes && lanes[i].valid();
    }
    if (allLanes && !controlConfirmed) {
      hs->confirm();
      controlConfirmed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *why = "handshake did not finish in time";
  return nullptr;
}

std::optional<TcpRogue::Cts> TcpRogue::readCts(Ms limit) {
  auto deadline = Clock::now() + limit;
  uint8_t buf[tcp::kMaxCtsBytes];
  size_t have = 0, want = sizeof(tcp::CtsHeader);
  while (have < want) {
    pollfd p{lane0_.get(), POLLIN, 0};
    if (::poll(&p, 1, remainingMs(deadline)) != 1) return std::nullopt;
    ssize_t n = ::recv(lane0_.get(), buf + have, want - have, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return std::nullopt;
    if (n > 0) have += size_t(n);
    if (have == sizeof(tcp::CtsHeader)) {
      tcp::CtsHeader h;
      memcpy(&h, buf, sizeof h);
      if (h.magic != tcp::kCtsMagic || h.n < 1 || h.n > kMaxRecvs) return std::nullopt;
      want = sizeof h + h.n * sizeof(tcp::CtsEntry);
    }
  }
  tcp::CtsHeader h;
  tcp::CtsEntry e;
  memcpy(&h, buf, sizeof h);
  memcpy(&e, buf + sizeof h, sizeof e);
  return Cts{h.seq, h.slot, e.tag, e.size};
}

bool TcpRogue::sendOn(int lane, std::span<const uint8_t> bytes, Ms limit) {
  const int fd = fdOf(lane);
  size_t off = 0;
  while (off < bytes.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, int(limit.count())) != 1) return false;
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) off += size_t(n);
    else if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return true;
}

void TcpRogue::shrinkReceiveBuffer(int lane, int bytes) {
  setsockopt(fdOf(lane), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

std::vector<uint8_t> TcpRogue::eagerMessage(int32_t tag, uint32_t horizon, uint32_t number,
                                            std::span<const uint8_t> payload) {
  tcp::ChunkHeader h;
  h.flags = tcp::kChunkEager;
  h.seq = horizon;
  h.tag = tag;
  h.total = h.length = uint32_t(payload.size());
  h.eager = number;
  std::vector<uint8_t> v(sizeof h);
  memcpy(v.data(), &h, sizeof h);
  v.insert(v.end(), payload.begin(), payload.end());
  return v;
}

std::vector<uint8_t> TcpRogue::chunkHeader(const Cts& cts, uint32_t total, uint32_t offset, uint32_t length) {
  tcp::ChunkHeader h;
  h.seq = cts.seq;
  h.slot = cts.slot;
  h.tag = cts.tag;
  h.total = total;
  h.offset = offset;
  h.length = length;
  std::vector<uint8_t> v(sizeof h);
  memcpy(v.data(), &h, sizeof h);
  return v;
}

void TcpRogue::closeAll() {
  lane0_.reset();
  helpers_.clear();
  control_.reset();
}

// ---- canaries ----------------------------------------------------------------------------------------------

void Canary::arm() {
  for (int i = 0; i < 8; i++) guardBefore[i] = guardAfter[i] = 0xC0FFEE0000000000ull + uint64_t(i);
  for (int i = 0; i < 64; i++) secret[i] = uint8_t(0xA0 + i);
  doneWord = 0;
}

bool Canary::intact() const {
  for (int i = 0; i < 8; i++)
    if (guardBefore[i] != 0xC0FFEE0000000000ull + uint64_t(i) || guardAfter[i] != 0xC0FFEE0000000000ull + uint64_t(i))
      return false;
  for (int i = 0; i < 64; i++)
    if (secret[i] != uint8_t(0xA0 + i)) return false;
  return doneWord == 0;
}

std::array<uint8_t, 40> forgedDescriptor(uint64_t src, uint64_t size, uint64_t doneWord, int64_t pid) {
  const uint64_t words[5] = {0x49434e4644455343ULL /* "ICNFDESC" */, src, size, doneWord, uint64_t(pid)};
  std::array<uint8_t, 40> d;
  memcpy(d.data(), words, sizeof words);
  return d;
}

}  // namespace icn::adversary
