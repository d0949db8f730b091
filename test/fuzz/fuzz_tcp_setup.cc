// libFuzzer harness: the TCP transport's connection set-up against a hostile peer, over real loopback TCP sockets
// and the real transport (createTransport, listen/accept, connect). The first input byte picks the side:
//  - even: hostile connectors against the accepting side (TcpListenComm behind the transport's listen()). The
//    harness opens up to 24 connections and, on each, writes HELLOs (control or lane blobs, valid or broken tags,
//    other communicators and transports), READYs, frames with fields from the input, partial frames, bytes after
//    its frames, endless streams; half-closes, closes and resets; accept() runs after every action.
//  - odd: a hostile acceptor against the connecting side (the transport's connect() state machine, called after
//    every action as NCCL would): it listens itself, accepts the connector's control and lane connections and
//    answers them with CHALLENGEs and HELLOs (honest, mutated or partial), frames, endless streams and closes.
// An "honest" action runs the whole exchange (or a prefix of it) the way a correct peer would, so that the
// fuzzer starts from connections that get through and mutates around them. A connection that gets through gives
// a comm, which is exercised once and closed. Every input ends with every socket closed and nothing pending.
//
// Invariants checked (a broken one aborts, so libFuzzer keeps the input):
//  - accept() and connect() fail only with an error a peer may cause, never a crash, an internal error or a hang;
//  - what the transport writes is well formed and in order: a CHALLENGE first, its HELLO only after the peer's
//    valid HELLO, with a tag that verifies; the connector writes nothing before the acceptor's CHALLENGE, READY
//    only after a valid HELLO, and its control READY only after the READY of every lane;
//  - the listener holds at most kMaxSetups connection set-ups (answered control connections still open) at once;
//  - a peer that streams bytes into a handshake cannot make it buffer without bound: of an endless stream into a
//    connection it keeps open, the transport reads at most kMaxConsumed bytes (what it read: what we wrote, less
//    what our kernel has not sent yet and what waits in its socket, which the harness finds by address);
//  - connect() gives up once the peer has closed every socket (the pending state is freed, not leaked).
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "core/auth.h"
#include "core/handshake.h"
#include "core/oob.h"
#include "core/socket.h"
#include "core/wire.h"
#include "tcp_fuzz_common.h"
#include "tcp_fuzz_ops.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {
namespace {
using namespace icn::fuzz;

using namespace icn::fuzz::setup_ops;

constexpr int kMaxActions = 256;
constexpr size_t kMaxConns = 24;
constexpr int kLanes = 2;  // ICN_TCP_STREAMS for this harness (LLVMFuzzerInitialize)
// The listener's set-up budget (ICN_LISTEN_MAX_SETUPS, set by LLVMFuzzerInitialize): that many connections' worth of
// sockets (control, lane 0 and the helper lanes each), however the peers spread them over set-ups.
constexpr int kListenMaxSetups = 4;
constexpr int kMaxSetups = kListenMaxSetups * (2 + kLanes);
// What a handshake may read of an endless stream: a frame (64 KiB) with ample room to spare.
constexpr uint64_t kMaxConsumed = 1u << 20;
constexpr uint64_t kCommId = 0x1c2d3e4f;

Transport& transport() {
  static std::unique_ptr<Transport> t = [] {
    std::unique_ptr<Transport> out;
    std::string why;
    if (createTransport(&out, &why) != Status::Ok) abort();
    return out;
  }();
  return *t;
}

bool peerCausable(Status st) { return st == Status::RemoteError || st == Status::SystemError; }

Digest digestOf(Hello h) {
  h.mac.clear();
  return helloDigest(h);
}
std::vector<uint8_t> tagOf(char kind, std::span<const uint8_t> first, std::span<const uint8_t> second) {
  Digest d = auth::tag(proofMessage(kind, first, second));
  return {d.begin(), d.end()};
}
void token(uint8_t index, uint8_t* out) {
  for (size_t i = 0; i < kTokenSize; i++) out[i] = static_cast<uint8_t>(index * 31 + i * 7 + 1);
}

// One TCP connection as the harness sees it.
struct Conn {
  PeerSocket sock;
  std::vector<uint8_t> in;
  bool eof = false;
  bool over = false;  // past the handshake: what follows is not parsed
  // Hostile connector: the acceptor's CHALLENGE and HELLO; hostile acceptor: the connector's HELLO and READY.
  bool gotChallenge = false;
  uint8_t nonceA[16] = {};
  bool gotHello = false, gotReady = false;
  Hello theirs;
  Digest theirDigest{};
  Blob theirBlob;
  bool theirBlobOk = false;
  // What we sent.
  bool sentHello = false, sentValidHello = false;
  int hellos = 0;  // HELLO frames written whole: with more than one, which the peer took is not ours to say
  Hello mine;
  Digest myDigest{};
  bool answeredControl = false;  // hostile connector: the listener answered this control connection
};

class SetupHarness {
 public:
  explicit SetupHarness(Input& in) : acceptorSide_(!(in.byte() & 1)) {
    config_.commId = in.pick({kCommId, kCommId, 0});
    if (acceptorSide_) {
      if (transport().listen(0, config_, handle_, &listener_) != Status::Ok) abort();
      std::string why;
      if (readListenHandle(handle_, kTransportTcp, &addr_, &why) != Status::Ok) abort();
    } else {
      listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (listenFd_ < 0 || ::bind(listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
          ::listen(listenFd_, 64) != 0 || getsockname(listenFd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        abort();
      memcpy(&addr_.storage, &a, sizeof a);
      addr_.len = sizeof a;
      if (writeListenHandle(handle_, kTransportTcp, addr_) != Status::Ok) abort();
    }
  }

  ~SetupHarness() {
    if (acceptorSide_) {
      listener_.reset();
      conns_.clear();
    } else {
      // The peer goes away (resets: what it sent and was not read is dropped): a connect() under way must fail now
      // and free what it parked in the handle.
      for (auto& c : conns_) {
        linger l{1, 0};
        setsockopt(c->sock.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      conns_.clear();
      if (listenFd_ >= 0) ::close(listenFd_);
      listenFd_ = -1;
      // A loaded machine may delay the resets: generous, as a hang is what this is about.
      const auto limit = Clock::now() + std::chrono::seconds(2);
      while (connecting_ && Clock::now() < limit) {
        connectOnce();
        if (connecting_) usleep(100);
      }
      if (connecting_) broken("connect() neither failed nor finished within 2 s of the peer resetting every socket");
    }
    transport().quiesce();
  }

  void act(uint8_t op, Input& in) {
    switch (op) {
      case Connect:
        if (acceptorSide_) dial();
        else connectOnce();  // starts a new attempt when none is under way
        break;
      case HelloFrame: if (Conn* c = conn(in)) acceptorSide_ ? helloC(*c, in) : helloA(*c, in); break;
      case ReadyFrame: if (Conn* c = conn(in)) ready(*c, in); break;
      case ChallengeFrame: if (Conn* c = conn(in)) challenge(*c, in); break;
      case Frame: if (Conn* c = conn(in)) frame(*c, in); break;
      case Raw: if (Conn* c = conn(in)) c->sock.write(in.bytes(in.byte() % 65)); break;
      case Stream: if (Conn* c = conn(in)) stream(*c, in); break;
      case Flush: for (auto& c : conns_) c->sock.flush(); break;
      case ShutWr: if (Conn* c = conn(in)) c->sock.shutdown(in.byte() & 1 ? SHUT_WR : SHUT_RDWR); break;
      case Close: if (Conn* c = conn(in)) c->sock.close(); break;
      case Reset:
        if (Conn* c = conn(in)) {
          linger l{1, 0};
          setsockopt(c->sock.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
          c->sock.close();
        }
        break;
      case Shrink: if (Conn* c = conn(in)) shrinkBuffers(c->sock.fd(), 1, in.byte() & 1, true); break;
      case Poll: {
        const uint32_t n = in.pick({1, 4, 16}) % 32;
        for (uint32_t i = 0; i < n; i++) step();
        break;
      }
      case Honest: acceptorSide_ ? honestConnector(in) : honestAcceptor(in); break;
      case Pause: usleep(in.pick({50, 200, 1000}) % 2000); break;
      default: break;
    }
    step();
  }

 private:
  Conn* conn(Input& in) {
    const uint8_t b = in.byte();
    if (conns_.empty()) return nullptr;
    return conns_[b % conns_.size()].get();
  }

  // One turn of the transport (accept() or connect(), as NCCL polls them), then everything it wrote is read.
  void step() {
    for (auto& c : conns_) c->sock.flush();
    if (acceptorSide_) acceptOnce();
    else if (connecting_) connectOnce();
    else acceptConns();
    readAll();
  }

  // --- hostile connector against the listener ---

  void dial() {
    if (conns_.size() >= kMaxConns) return;
    int fd = ::socket(addr_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    if (::connect(fd, addr_.sa(), addr_.len) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      return;
    }
    auto c = std::make_unique<Conn>();
    c->sock = PeerSocket(fd);
    conns_.push_back(std::move(c));
  }

  void acceptOnce() {
    std::unique_ptr<RecvComm> comm;
    Status st = listener_->accept(&comm);
    if (st != Status::Ok) broken("accept() returned status %d", static_cast<int>(st));
    if (!comm) return;
    ICN_FUZZ_TRACE("accept() gave a comm");
    void* data = recvBuf_;
    size_t size = sizeof recvBuf_;
    int tag = 1;
    Request* r = nullptr;
    if (comm->irecv(1, &data, &size, &tag, nullptr, &r) == Status::Ok && r) {
      bool done = false;
      (void)r->test(&done, nullptr);
    }
    comm.reset();
  }

  Blob blobFrom(Input& in, const Blob* answerTo) {
    Blob b;
    const uint8_t kind = in.byte();
    b.kind = kind < 0x80 ? kBlobControl : kind < 0xE8 ? kBlobLane : kind < 0xF0 ? kBlobLane0Copy : kind;
    if (answerTo && kind < 0xF0) b.kind = answerTo->kind;
    if (b.kind == kBlobControl) b.flags = (kind & 1) ? kBlobFlagMirror : 0;  // an acceptor taking lane 0's copy
    const uint32_t v = answerTo ? answerTo->value : kLanes;
    b.value = static_cast<uint16_t>(in.pick({v, v, 0, 1, v + 1, kMaxLanes + 1u}));
    const uint32_t e = answerTo ? answerTo->eagerBytes : 16384;
    b.eagerBytes = in.pick({e, e, 0, e + 1, kMaxEagerBytes + 1});
    const uint8_t t = in.byte();
    if (answerTo && t < 0xC0) memcpy(b.token, answerTo->token, kTokenSize);
    else token(t % 8, b.token);  // 4-7: the tokens of the first honest connections
    return b;
  }

  // Our HELLO as a connector (control or lane blob), its tag valid unless the input says otherwise.
  void helloC(Conn& c, Input& in) {
    Hello h;
    h.transport = static_cast<uint8_t>(in.pick({kTransportTcp, kTransportTcp, kTransportUcx}));
    h.commId = in.pick({static_cast<uint32_t>(config_.commId), 0, 77});
    h.rank = 1;
    h.pid = 4242;
    h.host = in.byte() < 0xF0 ? "fuzz-connector" : "bad host";
    const Blob b = blobFrom(in, nullptr);
    h.blob = in.byte() < 0xF8 ? encodeBlob(b) : std::vector<uint8_t>(9, 0x41);
    sendHello(c, h, in.byte(), 'C', c.nonceA, std::span<const uint8_t>{});
  }

  // Writes HELLO h with tag mode `mode` (most: valid; then none, junk, a truncated frame).
  void sendHello(Conn& c, Hello h, uint8_t mode, char kind, std::span<const uint8_t> first,
                 std::span<const uint8_t> second) {
    const Digest d = digestOf(h);
    const bool valid = mode < 0xC0 && (kind == 'C' ? c.gotChallenge : c.gotHello);
    if (mode < 0xC0) h.mac = kind == 'C' ? tagOf('C', first, d) : tagOf('A', second, d);
    else if (mode < 0xE0) h.mac.assign(32, 0x5A);
    auto frame = encodeFrame(FrameType::Hello, encodeHello(h));
    if (mode >= 0xF0) frame.resize(frame.size() / 2);
    if (!c.sock.write(frame)) return;
    c.mine = h;
    c.myDigest = d;
    c.sentHello = true;
    c.hellos++;
    c.sentValidHello = c.sentValidHello || (valid && mode < 0xF0);
  }

  // READY with its tag over (connector's HELLO, acceptor's HELLO): valid for most modes, then a flipped bit, then a
  // wrong length byte. As the acceptor the harness has no READY to send; a hostile one may send it anyway.
  void ready(Conn& c, Input& in) {
    const uint8_t mode = in.byte();
    std::vector<uint8_t> payload{32};
    const auto tag = acceptorSide_ ? tagOf('R', c.myDigest, c.theirDigest) : tagOf('R', c.theirDigest, c.myDigest);
    payload.insert(payload.end(), tag.begin(), tag.end());
    if (mode >= 0xC0) payload[1 + mode % 32] ^= 0x01;
    if (mode >= 0xF0) payload[0] = mode;
    c.sock.write(encodeFrame(FrameType::Ready, payload));
  }

  void challenge(Conn& c, Input& in) {
    uint8_t nonce[16];
    const uint8_t mode = in.byte();
    for (int i = 0; i < 16; i++) nonce[i] = static_cast<uint8_t>(mode < 0xF0 ? i * 13 + 5 : in.byte());
    const size_t len = mode >= 0xE0 && mode < 0xF0 ? 15 : 16;  // or one byte short
    auto frame = encodeFrame(FrameType::Challenge, std::span<const uint8_t>(nonce, len));
    if (!c.sock.write(frame) || acceptorSide_) return;  // a connector's CHALLENGE: hostile, nothing to remember
    memcpy(c.nonceA, nonce, 16);
    c.gotChallenge = true;  // as the acceptor: the nonce our HELLO must carry
  }

  // A frame with fields from the input.
  void frame(Conn& c, Input& in) {
    WireWriter w;
    const uint8_t m = in.byte();
    const auto payload = in.bytes(in.byte() % 65);
    w.put<uint32_t>(m >= 0xF0 ? in.u32() : kWireMagic);
    w.put<uint16_t>(static_cast<uint16_t>(m >= 0xE0 && m < 0xF0 ? in.u16() : kWireVersion));
    w.put<uint16_t>(static_cast<uint16_t>(in.pick({1, 2, 3, 4, 0})));
    w.put<uint32_t>(in.pick({static_cast<uint32_t>(payload.size()), static_cast<uint32_t>(payload.size()) + 1,
                             kMaxFramePayload, kMaxFramePayload + 1, 0x80000000u}));
    w.bytes(payload);
    c.sock.write(w.buffer());
  }

  // An endless stream: as much as the connection takes (up to the input's budget), the transport polled in between.
  void stream(Conn& c, Input& in) {
    const uint32_t budget = in.pick({64 << 10, 1 << 20, 4 << 20}) % (8u << 20);
    const uint8_t fill = in.byte();
    std::vector<uint8_t> chunk(64 << 10, fill);
    if (fill >= 0xF0) {  // READY frames back to back: well formed, unexpected
      auto f = encodeFrame(FrameType::Ready, std::vector<uint8_t>(33, 32));
      for (size_t i = 0; i < chunk.size(); i++) chunk[i] = f[i % f.size()];
    }
    const uint64_t start = c.sock.written();
    int idle = 0;
    while (c.sock.written() - start < budget && idle < 64 && c.sock.open() && !c.sock.broken()) {
      const uint64_t before = c.sock.written();
      if (c.sock.queued() == 0) c.sock.write(chunk);
      for (int i = 0; i < 4; i++) step();
      idle = c.sock.written() != before ? 0 : idle + 1;
    }
    readAll();
    if (c.eof || !c.sock.open() || c.sock.broken()) return;
    const int transport = transportEnd(c.sock.fd());  // looked up each time: descriptors are reused
    if (transport < 0) return;
    // Not yet sent by our kernel (sent but not yet acknowledged data is already in the transport's socket: on the
    // loopback nothing is in flight), and not yet read by the transport.
    int ours = 0;
    ioctl(c.sock.fd(), SIOCOUTQNSD, &ours);
    const uint64_t pending = static_cast<uint64_t>(ours) + static_cast<uint64_t>(unread(transport));
    const uint64_t consumed = c.sock.written() - std::min(pending, c.sock.written());
    ICN_FUZZ_TRACE("stream: %llu bytes written, %llu read by the transport",
                   static_cast<unsigned long long>(c.sock.written()), static_cast<unsigned long long>(consumed));
    if (consumed > kMaxConsumed)
      broken("a handshake connection read %llu bytes of an endless stream and is still open",
             static_cast<unsigned long long>(consumed));
  }

  // The transport's end of our connection `fd`: the socket of this process whose addresses mirror ours.
  static int transportEnd(int fd) {
    sockaddr_storage mine{}, peer{};
    socklen_t ml = sizeof mine, pl = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
      return -1;
    for (int cand = 0; cand < 1024; cand++) {
      sockaddr_storage a{}, b{};
      socklen_t al = sizeof a, bl = sizeof b;
      if (cand == fd || getsockname(cand, reinterpret_cast<sockaddr*>(&a), &al) != 0 || al != pl ||
          memcmp(&a, &peer, al) != 0)
        continue;
      if (getpeername(cand, reinterpret_cast<sockaddr*>(&b), &bl) == 0 && bl == ml && memcmp(&b, &mine, bl) == 0)
        return cand;
    }
    return -1;
  }

  // Reads every connection and checks what the transport wrote.
  void readAll() {
    for (auto& c : conns_) readConn(*c);
    if (acceptorSide_) checkSetups();
  }

  void readConn(Conn& c) {
    if (!c.sock.open() || c.eof) return;
    const size_t before = c.in.size();
    if (!c.sock.read(&c.in, 1 << 20)) c.eof = true;
    if (!acceptorSide_ && c.in.size() > before && c.sock.written() < 28 && !c.over)
      broken("the connector wrote before the acceptor's CHALLENGE");
    while (!c.over && c.in.size() >= 12) {
      FrameType type;
      uint32_t len = 0;
      std::string why;
      if (decodeFrameHeader(std::span<const uint8_t, 12>(c.in.data(), 12), &type, &len, &why) != Status::Ok)
        broken("the transport wrote a bad frame header: %s", why.c_str());
      if (c.in.size() < 12 + len) break;
      std::span<const uint8_t> payload(c.in.data() + 12, len);
      acceptorSide_ ? fromAcceptor(c, type, payload) : fromConnector(c, type, payload);
      c.in.erase(c.in.begin(), c.in.begin() + 12 + len);
    }
    if (c.over) c.in.clear();
  }

  void fromAcceptor(Conn& c, FrameType type, std::span<const uint8_t> payload) {
    if (type == FrameType::Challenge) {
      if (c.gotChallenge || payload.size() != 16) broken("the listener sent a second or malformed CHALLENGE");
      memcpy(c.nonceA, payload.data(), 16);
      c.gotChallenge = true;
      return;
    }
    if (type != FrameType::Hello || !c.gotChallenge) broken("the listener sent frame type %d out of turn", int(type));
    std::string why;
    if (decodeHello(payload, &c.theirs, &why) != Status::Ok) broken("the listener's HELLO: %s", why.c_str());
    if (!c.sentValidHello) broken("the listener answered a HELLO whose tag does not verify");
    c.theirDigest = digestOf(c.theirs);
    if (c.hellos == 1 && (memcmp(c.theirs.nonce, c.nonceA, 16) != 0 ||
                          !auth::verifyTag(proofMessage('A', c.myDigest, c.theirDigest), c.theirs.mac)))
      broken("the listener's HELLO does not verify");
    c.gotHello = true;
    c.theirBlobOk = decodeBlob(c.theirs.blob, &c.theirBlob, &why) == Status::Ok;
    if (!c.theirBlobOk) broken("the listener's blob: %s", why.c_str());
    c.answeredControl = c.theirBlob.kind == kBlobControl;
    ICN_FUZZ_TRACE("the listener answered a %s HELLO (value %u)", c.answeredControl ? "control" : "lane",
                   c.theirBlob.value);
    c.over = true;  // a comm's clear-to-send records may follow
  }

  // At most kMaxSetups answered control connections may be open at once, the listener's budget in sockets (it
  // closes the rest, or leaves them unanswered in its handshake queue).
  void checkSetups() {
    auto count = [&] {
      int n = 0;
      for (auto& c : conns_) n += c->answeredControl && !c->eof && c->sock.open();
      return n;
    };
    // A close the listener just made may not have reached us yet (a loaded machine may defer loopback delivery).
    for (int wait = 0; count() > kMaxSetups && wait < 20; wait++) {
      usleep(2000);
      for (auto& c : conns_) readConn(*c);
    }
    if (const int n = count(); n > kMaxSetups)
      broken("the listener holds %d connection set-ups (at most %d proven peers in set-up at once)", n, kMaxSetups);
  }

  // --- hostile acceptor against the connector ---

  void connectOnce() {
    if (!connecting_) {
      if (attempts_ >= 3) return;
      attempts_++;
      connecting_ = true;
    }
    std::unique_ptr<SendComm> comm;
    Status st = transport().connect(0, config_, handle_, &comm);
    acceptConns();
    if (st != Status::Ok) {
      if (!peerCausable(st)) broken("connect() returned status %d", static_cast<int>(st));
      ICN_FUZZ_TRACE("connect() failed: status %d", static_cast<int>(st));
      connecting_ = false;
      return;
    }
    if (!comm) return;
    ICN_FUZZ_TRACE("connect() gave a comm");
    connecting_ = false;
    uint8_t msg[64] = {};
    Request* r = nullptr;
    if (comm->isend(msg, sizeof msg, 1, nullptr, &r) == Status::Ok && r) {
      bool done = false;
      (void)r->test(&done, nullptr);
    }
    comm.reset();
  }

  void acceptConns() {
    while (listenFd_ >= 0 && conns_.size() < kMaxConns) {
      int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      auto c = std::make_unique<Conn>();
      c->sock = PeerSocket(fd);
      conns_.push_back(std::move(c));
    }
  }

  // Our HELLO as the acceptor, answering the connector's (its blob echoed, or mutated by the input).
  void helloA(Conn& c, Input& in) {
    Hello h;
    h.transport = static_cast<uint8_t>(in.pick({kTransportTcp, kTransportTcp, kTransportIb}));
    h.commId = in.pick({static_cast<uint32_t>(config_.commId), 0, 77});
    h.rank = 0;
    h.pid = 4343;
    h.host = "fuzz-acceptor";
    memcpy(h.nonce, c.nonceA, 16);
    if (in.byte() >= 0xF0) h.nonce[0] ^= 1;
    const Blob b = blobFrom(in, c.theirBlobOk ? &c.theirBlob : nullptr);
    h.blob = in.byte() < 0xF8 ? encodeBlob(b) : std::vector<uint8_t>(9, 0x41);
    sendHello(c, h, in.byte(), 'A', std::span<const uint8_t>{}, c.theirDigest);
  }

  void fromConnector(Conn& c, FrameType type, std::span<const uint8_t> payload) {
    std::string why;
    if (type == FrameType::Hello) {
      if (c.gotHello) broken("the connector sent a second HELLO");
      if (decodeHello(payload, &c.theirs, &why) != Status::Ok) broken("the connector's HELLO: %s", why.c_str());
      c.theirDigest = digestOf(c.theirs);
      c.gotHello = true;
      c.theirBlobOk = decodeBlob(c.theirs.blob, &c.theirBlob, &why) == Status::Ok;
      if (!c.theirBlobOk) broken("the connector's blob: %s", why.c_str());
      return;
    }
    if (type != FrameType::Ready || c.gotReady) broken("the connector sent frame type %d out of turn", int(type));
    if (!c.sentValidHello) broken("the connector sent READY for a HELLO whose tag does not verify");
    c.gotReady = true;
    c.over = true;
    ICN_FUZZ_TRACE("the connector sent READY on its %s connection",
                   c.theirBlob.kind == kBlobControl ? "control" : "lane");
    if (c.hellos != 1) return;
    if (payload.size() != 33 || !auth::verifyTag(proofMessage('R', c.theirDigest, c.myDigest), payload.subspan(1)))
      broken("the connector's READY does not verify");
    if (c.theirBlob.kind == kBlobControl) checkLanesReady(c);
  }

  // The connector's control READY comes only once every lane's handshake is over on its side.
  void checkLanesReady(const Conn& control) {
    const int lanes = control.mine.blob.size() ? [&] {
      Blob b;
      std::string why;
      return decodeBlob(control.mine.blob, &b, &why) == Status::Ok ? b.value + 1 : 0;
    }() : 0;
    auto lanesReady = [&] {
      int ready = 0;
      for (int i = 0; i < lanes; i++)
        for (auto& c : conns_)
          if (c->gotReady && c->theirBlobOk && c->theirBlob.kind == kBlobLane && c->theirBlob.value == i &&
              memcmp(c->theirBlob.token, control.theirBlob.token, kTokenSize) == 0) {
            ready++;
            break;
          }
      return ready == lanes;
    };
    for (int attempt = 0; attempt < 10; attempt++) {
      if (attempt) usleep(5000);  // a lane's READY may still be on its way through the loopback
      for (auto& c : conns_)
        if (c.get() != &control) readConn(*c);
      if (lanesReady()) return;
    }
    broken("the connector sent its control READY before every lane's READY");
  }

  // --- honest peers ---

  // Runs the transport until `done` holds (a few dozen turns at most).
  template <class F>
  bool until(F&& done) {
    for (int i = 0; i < 40; i++) {
      if (done()) return true;
      step();
      if (i >= 4) usleep(50);
    }
    return done();
  }

  // A connector that does everything right: control handshake (kLanes or fewer lanes), every lane, READY on
  // control; `stopAt` (from the input) leaves it after one of those steps.
  void honestConnector(Input& in) {
    const uint8_t stopAt = in.byte() % 6;
    const uint16_t lanes = static_cast<uint16_t>(in.byte() % (kLanes + 1));
    const uint8_t tok = static_cast<uint8_t>(4 + honest_++);
    if (conns_.size() + lanes + 2 > kMaxConns) return;
    Conn* control = handshakeAsConnector(Blob{kBlobControl, lanes, 16384, {}}, tok, stopAt >= 1);
    if (!control || stopAt <= 1 || !control->gotHello) return;
    std::vector<Conn*> laneConns;
    for (uint16_t i = 0; i <= control->theirBlob.value; i++) {
      Conn* l = handshakeAsConnector(Blob{kBlobLane, i, 16384, {}}, tok, stopAt >= 3);
      if (!l || stopAt <= 2) return;
      laneConns.push_back(l);
    }
    for (Conn* l : laneConns) sendReady(*l);
    if (stopAt <= 3) return;
    sendReady(*control);
    if (stopAt <= 4) return;
    until([&] { return control->eof; });  // the comm came out (exercised and closed by acceptOnce)
  }

  Conn* handshakeAsConnector(Blob b, uint8_t tok, bool waitAnswer) {
    dial();
    if (conns_.empty()) return nullptr;
    Conn* c = conns_.back().get();
    if (!until([&] { return c->gotChallenge || c->eof; }) || c->eof) return nullptr;
    Hello h;
    h.transport = kTransportTcp;
    h.commId = config_.commId;
    h.rank = 1;
    h.pid = 4242;
    h.host = "fuzz-connector";
    token(tok, b.token);
    h.blob = encodeBlob(b);
    sendHello(*c, h, 0, 'C', c->nonceA, std::span<const uint8_t>{});
    if (waitAnswer) until([&] { return c->gotHello || c->eof; });
    return c;
  }

  void sendReady(Conn& c) {
    std::vector<uint8_t> payload{32};
    auto tag = tagOf('R', c.myDigest, c.theirDigest);
    payload.insert(payload.end(), tag.begin(), tag.end());
    c.sock.write(encodeFrame(FrameType::Ready, payload));
  }

  // An acceptor that does everything right: CHALLENGE on every connection, then a HELLO answering each of the
  // connector's (its lane count capped by the input), until the comm comes out; `stopAt` leaves it early.
  void honestAcceptor(Input& in) {
    const uint8_t stopAt = in.byte() % 4;
    const uint16_t maxLanes = static_cast<uint16_t>(in.byte() % (kLanes + 1));
    if (!connecting_) connectOnce();
    int answered = 0;
    for (int round = 0; round < 60 && connecting_; round++) {
      for (auto& cp : conns_) {
        Conn& c = *cp;
        if (!c.sock.open() || c.eof) continue;
        if (!c.gotChallenge && c.sock.written() == 0) {
          uint8_t nonce[16];
          for (int i = 0; i < 16; i++) nonce[i] = static_cast<uint8_t>(round * 7 + i);
          c.sock.write(encodeFrame(FrameType::Challenge, nonce));
          memcpy(c.nonceA, nonce, 16);
          c.gotChallenge = true;
        }
        if (c.gotHello && !c.sentHello && c.theirBlobOk && stopAt > 0) {
          if (stopAt == 1 && answered > 0) continue;
          Hello h;
          h.transport = kTransportTcp;
          h.commId = config_.commId;
          h.rank = 0;
          h.pid = 4343;
          h.host = "fuzz-acceptor";
          memcpy(h.nonce, c.nonceA, 16);
          Blob b = c.theirBlob;
          if (b.kind == kBlobControl) b.value = std::min(b.value, maxLanes);
          h.blob = encodeBlob(b);
          sendHello(c, h, 0, 'A', std::span<const uint8_t>{}, c.theirDigest);
          answered++;
        }
      }
      if (stopAt == 2 && answered > 1) return;
      step();
      if (round >= 4) usleep(50);
    }
  }

  const bool acceptorSide_;  // true: the transport accepts, the harness connects
  CommConfig config_;
  std::array<uint8_t, kHandleSize> handle_{};
  SockAddr addr_;
  std::unique_ptr<ListenComm> listener_;
  int listenFd_ = -1;
  bool connecting_ = false;
  int attempts_ = 0;
  int honest_ = 0;
  std::vector<std::unique_ptr<Conn>> conns_;
  uint8_t recvBuf_[256];
};

}  // namespace
}  // namespace icn::tcp

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::fuzz::quietLogs();
  icn::fuzz::fillCounterRegistry();
  setenv("ICN_SOCKET_IFNAME", "lo", 1);
  setenv("ICN_TCP_STREAMS", std::to_string(icn::tcp::kLanes).c_str(), 1);
  setenv("ICN_LISTEN_MAX_SETUPS", std::to_string(icn::tcp::kListenMaxSetups).c_str(), 1);
  setenv("ICN_CONNECT_TIMEOUT_MS", "2000", 1);  // longer than any input: deadlines never decide an outcome
  setenv("ICN_PEER_TIMEOUT_MS", "5", 1);
  icn::tcp::transport();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  icn::fuzz::Input in(data, size);
  icn::tcp::SetupHarness h(in);
  icn::fuzz::runScript(in, icn::tcp::kOps, icn::tcp::Repeat, icn::tcp::kMaxActions,
                       [&](uint8_t op, icn::fuzz::Input& args) { h.act(op, args); });
  return 0;
}
