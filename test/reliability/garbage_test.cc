// Garbage on the listen port: while hostile or broken clients hammer a listen comm (random bytes, an HTTP
// request, wrong magic/version, oversized lengths, truncated frames, HELLOs with junk transport payloads,
// connections that open and stall, resets), a real rank still connects promptly and its data arrives
// intact; every bad connection is closed by the listener (stalled ones at ICN_CONNECT_TIMEOUT_MS), with
// a WARN saying why, and accept() never fails. (test/adversary plays a protocol-aware hostile peer.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <optional>
#include <random>
#include <thread>

#include "core/auth.h"

#include "core/handshake.h"
#include "core/oob.h"
#include "core/wire.h"
#include "ranks.h"
#include "raw_peer.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::rel {
namespace {

constexpr int kConnectTimeoutMs = 8000;

// The suite runs against the transport ICN_TRANSPORT names (ucx unless it says tcp).
bool tcpTransport() {
  const char* t = getenv("ICN_TRANSPORT");
  return t && std::string(t) == "tcp";
}
uint8_t transportId() { return tcpTransport() ? kTransportTcp : kTransportUcx; }

struct Garbage {
  const char* what;
  std::vector<uint8_t> bytes;
  bool closeAfter = false;  // client closes (truncation); otherwise it waits to be dropped
  bool reset = false;       // abortive close (RST)
  // A HELLO with this blob, sent after reading the listener's CHALLENGE and tagged for it (as a buggy-but-honest
  // or protocol-aware client would); `bytes` is unused then.
  std::optional<std::vector<uint8_t>> taggedBlob = std::nullopt;
};

constexpr uint64_t kCommId = 0x1234;  // netapi::Plugin::init's default

Hello helloWithBlob(std::vector<uint8_t> blob) {
  Hello h = makeLocalHello(transportId(), kCommId, std::move(blob));
  h.host = "garbage-client";
  return h;
}

std::vector<uint8_t> taggedHelloFrame(std::vector<uint8_t> blob, const uint8_t* nonceA) {
  Hello h = helloWithBlob(std::move(blob));
  Digest t = auth::tag(proofMessage('C', std::span<const uint8_t>(nonceA, 16), helloDigest(h)));
  h.mac.assign(t.begin(), t.end());
  return encodeFrame(FrameType::Hello, encodeHello(h));
}

// A real UCX worker address from a worker that is never progressed: a peer that gets through the HELLO
// and then never completes wire-up.
class SilentUcxWorker {
 public:
  SilentUcxWorker() {
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG;
    if (ucp_init(&p, nullptr, &ctx_) != UCS_OK) return;
    ucp_worker_params_t wp{};
    if (ucp_worker_create(ctx_, &wp, &worker_) != UCS_OK) return;
    ucp_address_t* a = nullptr;
    size_t len = 0;
    if (ucp_worker_get_address(worker_, &a, &len) != UCS_OK) return;
    // The UCX transport's connection blob: u32 length | worker address.
    WireWriter w;
    w.put<uint32_t>(static_cast<uint32_t>(len));
    w.bytes({reinterpret_cast<const uint8_t*>(a), len});
    address_ = std::move(w.buffer());
    ucp_worker_release_address(worker_, a);
  }
  ~SilentUcxWorker() {
    if (worker_) ucp_worker_destroy(worker_);
    if (ctx_) ucp_cleanup(ctx_);
  }
  const std::vector<uint8_t>& address() const { return address_; }

 private:
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
};

std::vector<Garbage> garbageList(const std::vector<uint8_t>& silentAddress) {
  std::mt19937 rng(20240607);
  auto random = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  };
  std::string http = "GET / HTTP/1.1\r\nHost: icn\r\n\r\n";
  auto hello = encodeFrame(FrameType::Hello, encodeHello(helloWithBlob({1, 2, 3})));
  std::vector<uint8_t> truncatedHello(hello.begin(), hello.begin() + static_cast<long>(hello.size() / 2));
  std::vector<Garbage> g = {
      {"random 1 byte", random(1)},
      {"random 11 bytes", random(11)},
      {"random 12 bytes", random(12)},
      {"random 4 KiB", random(4096)},
      {"random 200 KiB", random(200 * 1024)},
      {"http request", {http.begin(), http.end()}},
      {"wrong magic", testing::rawHeader(0xdeadbeef, kWireVersion, 1, 16)},
      {"wrong version", testing::rawHeader(kWireMagic, 9, 1, 16)},
      {"unknown type", testing::rawHeader(kWireMagic, kWireVersion, 77, 16)},
      {"oversized length", testing::rawHeader(kWireMagic, kWireVersion, 1, 0x7FFFFFFF)},
      {"length just over limit", testing::rawHeader(kWireMagic, kWireVersion, 1, kMaxFramePayload + 1)},
      {"truncated header", {0x31, 0x4e, 0x43}, true},
      {"truncated hello", truncatedHello, true},
      {"hello with empty transport payload", encodeFrame(FrameType::Hello, encodeHello(helloWithBlob({})))},
      {"hello with junk UCX address", encodeFrame(FrameType::Hello, encodeHello(helloWithBlob(random(300))))},
      {"hello with tiny junk UCX address", encodeFrame(FrameType::Hello, encodeHello(helloWithBlob(random(3))))},
      {"tagged hello with empty transport payload", {}, false, false, std::vector<uint8_t>{}},
      {"stall after a valid hello (real UCX worker, never wires up)", {}, false, false, silentAddress},
      {"second stall after a valid hello", {}, false, false, silentAddress},
      {"stall (connect, send nothing)", {}},
      {"stall after half a header", {0x31, 0x4e, 0x43, 0x49, 1, 0}},
      {"stall after a full header", testing::rawHeader(kWireMagic, kWireVersion, 1, 100)},
      {"connect then close", {}, true},
      {"connect then reset", {}, true, true},
  };
  return g;
}

int connectTo(const SockAddr& a) {
  int fd = socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, a.sa(), a.len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// Sends what it can (the listener may close mid-way; that is fine).
void sendAll(int fd, const std::vector<uint8_t>& b) {
  size_t off = 0;
  while (off < b.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 2000) <= 0) return;
    ssize_t n = send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0 && errno != EAGAIN && errno != EINTR) return;
    if (n > 0) off += static_cast<size_t>(n);
  }
}

// True once the server side closed the connection (EOF or reset), draining anything it sent.
bool closedByServer(int fd) {
  for (;;) {
    uint8_t buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

TEST(ListenPort, GarbageIsRejectedAndRealConnectionCompletes) {
  std::array<RankSetup, 2> setup;
  for (auto& s : setup) s.env = {{"ICN_CONNECT_TIMEOUT_MS", std::to_string(kConnectTimeoutMs)}};
  auto out = runPair(
      [](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
        SockAddr addr;
        std::string why;
        ASSERT_EQ(readListenHandle(std::span<uint8_t, kHandleSize>(reinterpret_cast<uint8_t*>(handle), kHandleSize),
                                   transportId(), &addr, &why),
                  Status::Ok)
            << why;
        // The garbage arrives first, so the real connection queues behind every bad one.
        // A peer that gets through its HELLO and then never finishes: a real UCX worker that is never
        // progressed, or a valid TCP connection request whose READY and lanes never come.
        SilentUcxWorker silent;
        std::vector<uint8_t> stallBlob = silent.address();
        if (tcpTransport()) {
          tcp::Blob b;
          b.kind = tcp::kBlobControl;
          b.value = 2;
          b.token[0] = 1;
          stallBlob = tcp::encodeBlob(b);
        }
        ASSERT_FALSE(stallBlob.empty()) << "cannot create a UCX worker for the stalling client";
        auto garbage = garbageList(stallBlob);
        std::vector<int> fds;
        for (auto& g : garbage) {
          int fd = connectTo(addr);
          ASSERT_GE(fd, 0) << g.what;
          if (g.taggedBlob) {  // read the CHALLENGE (driving the listener meanwhile), then answer it
            uint8_t challenge[12 + 16];
            size_t got = 0;
            for (int i = 0; i < 2000 && got < sizeof challenge; i++) {
              void* none = nullptr;
              ASSERT_EQ(r.plugin.net->accept(l, &none, nullptr), ncclSuccess);
              ssize_t n = recv(fd, challenge + got, sizeof challenge - got, MSG_DONTWAIT);
              if (n > 0) got += size_t(n);
              else usleep(1000);
            }
            ASSERT_EQ(got, sizeof challenge) << g.what << ": no CHALLENGE";
            sendAll(fd, taggedHelloFrame(*g.taggedBlob, challenge + 12));
          }
          sendAll(fd, g.bytes);
          if (g.reset) {
            linger lg{1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
          }
          if (g.closeAfter) {
            close(fd);
            fd = -1;
          }
          fds.push_back(fd);
        }
        void* rc = nullptr;
        for (int i = 0; i < 20 && !rc; i++) {  // let the listener chew on the garbage first
          ASSERT_EQ(r.plugin.net->accept(l, &rc, nullptr), ncclSuccess) << "accept failed because of garbage";
          usleep(10000);
        }
        ASSERT_EQ(rc, nullptr) << "a garbage connection produced a comm";
        ASSERT_TRUE(r.peer.send(handle, sizeof handle));
        // Well before the stalled clients time out: they must not hold up the real one.
        ncclResult_t res = netapi::acceptBlocking(r.plugin, l, &rc, std::chrono::milliseconds(kConnectTimeoutMs * 3 / 4));
        ASSERT_EQ(res, ncclSuccess) << "the real connection was not accepted while garbage was pending";
        ASSERT_NE(rc, nullptr);
        std::vector<uint8_t> buf(1 << 20);
        void* d = buf.data();
        size_t sz = buf.size();
        int tag = 5;
        void* req = nullptr;
        ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
        int got = 0;
        ASSERT_EQ(netapi::waitRequest(r.plugin, req, &got, kWait), ncclSuccess);
        EXPECT_EQ(got, 1 << 20);
        EXPECT_EQ(netapi::checkPattern(buf.data(), buf.size(), 99), SIZE_MAX) << "corrupt data";
        // Keep polling accept (as NCCL's proxy would for later peers) until every bad client was dropped.
        auto deadline = netapi::Clock::now() + std::chrono::milliseconds(kConnectTimeoutMs + 6000);
        std::vector<bool> closed(fds.size(), false);
        size_t open = 0;
        do {
          void* extra = nullptr;
          ASSERT_EQ(r.plugin.net->accept(l, &extra, nullptr), ncclSuccess) << "accept failed because of garbage";
          ASSERT_EQ(extra, nullptr) << "a garbage connection produced a comm";
          open = 0;
          for (size_t i = 0; i < fds.size(); i++) {
            if (fds[i] >= 0 && !closed[i]) closed[i] = closedByServer(fds[i]);
            open += fds[i] >= 0 && !closed[i];
          }
          usleep(20000);
        } while (open > 0 && netapi::Clock::now() < deadline);
        for (size_t i = 0; i < fds.size(); i++) {
          if (fds[i] < 0) continue;
          EXPECT_TRUE(closed[i]) << "listener never dropped: " << garbage[i].what;
          close(fds[i]);
        }
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
        EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        ASSERT_NE(s, nullptr);
        std::vector<uint8_t> buf(1 << 20);
        netapi::fillPattern(buf.data(), buf.size(), 99);
        void* req = nullptr;
        while (!req) ASSERT_EQ(r.plugin.net->isend(s, buf.data(), buf.size(), 5, nullptr, nullptr, &req), ncclSuccess);
        ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      },
      setup, std::chrono::seconds(90));
  EXPECT_TRUE(out[0].cleanExit());
  EXPECT_TRUE(out[1].cleanExit());
  // Each kind of garbage was explained in a WARN on the listening rank.
  for (const char* why : {"fails its integrity check", "bad magic", "protocol version 9", "unknown frame type 77", "exceeds the 65536-byte limit",
                          "closed the connection during the handshake", "not completed within"})
    EXPECT_TRUE(out[0].warnHas({"handshake with", why})) << "no WARN saying: " << why;
  EXPECT_TRUE(out[0].warnHas({"garbage-client", tcpTransport() ? "malformed TCP connection blob" : "malformed UCX connection blob"}));
}

}  // namespace
}  // namespace icn::rel
