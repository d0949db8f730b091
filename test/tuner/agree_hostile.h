// A hostile member of a tuner agreement: a process that holds the rendezvous secret (it read the user's rendezvous
// file, or holds the job key) and speaks the protocol as it likes. Used against a leader in this process
// (agree_peer_test.cc) and against leaders in forked rank processes (multiproc_test.cc).
#pragma once
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/auth.h"
#include "tuner/agree/wire.h"

namespace icn::tuner::hostile {

using namespace agree;

// The rendezvous file of (commId, nRanks) in `runtimeDir` (the directory XDG_RUNTIME_DIR names).
inline std::string rendezvousFile(const std::string& runtimeDir, uint64_t commId, int nRanks) {
  char name[64];
  snprintf(name, sizeof name, "/icn/agree-%016llx-%d", static_cast<unsigned long long>(commId), nRanks);
  return runtimeDir + name;
}

// Waits up to `ms` for the leader's file and reads its address and secret.
inline bool readRendezvous(const std::string& file, std::string* addr, Token* token, int ms = 5000) {
  auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < limit) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    size_t a = text.find("addr "), t = text.find("token ");
    if (a != std::string::npos && t != std::string::npos && text.size() >= t + 6 + 64) {
      *addr = text.substr(a + 5, text.find('\n', a) - a - 5);
      return unhex(text.substr(t + 6, 64), token->data(), token->size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// A TCP connection speaking the agreement's frames.
class Wire {
 public:
  Wire() = default;
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;
  ~Wire() { close(); }

  bool connectTo(const std::string& addr) {
    SockAddr sa;
    if (!parseAddr(addr, &sa)) return false;
    fd_ = socket(sa.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::connect(fd_, sa.sa(), sa.len) != 0) return false;
    sockaddr_storage me{};
    socklen_t len = sizeof me;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&me), &len);
    SockAddr mine;
    memcpy(&mine.storage, &me, len);
    mine.len = len;
    name_ = mine.str();
    return true;
  }
  // This end's address as the other side names it in its log ("127.0.0.1:port").
  const std::string& name() const { return name_; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool sendRaw(const std::string& bytes) {
    return fd_ >= 0 && ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  bool send(uint8_t type, const std::string& payload = {}) { return sendRaw(frame(type, payload)); }

  // The next frame within `ms`; false when the connection closed or nothing came.
  bool read(uint8_t* type, std::string* payload, int ms = 2000) {
    uint8_t h[kHeader];
    if (!readAll(h, sizeof h, ms)) return false;
    Reader r{h, sizeof h};
    uint32_t magic = r.u32();
    *type = r.u8();
    r.u8(), r.u8(), r.u8();
    uint32_t len = r.u32();
    if (magic != kMagic || len > kMaxPayload) return false;
    payload->resize(len);
    return len == 0 || readAll(payload->data(), len, ms);
  }
  // Reads frames until one of `type` comes (others are skipped); false when none came within `ms`.
  bool awaitFrame(uint8_t type, std::string* payload, int ms = 2000) {
    auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    uint8_t t = 0;
    while (std::chrono::steady_clock::now() < limit)
      if (!read(&t, payload, ms)) return false;
      else if (t == type) return true;
    return false;
  }
  // True once the other side closed the connection (frames before the close are skipped), within `ms`.
  bool closedWithin(int ms) {
    auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    char buf[4096];
    while (std::chrono::steady_clock::now() < limit) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
    return false;
  }

  // Answers the challenge with `token`'s proof for (commId, nRanks) and checks the welcome.
  bool prove(const Token& token, uint64_t commId, int nRanks) {
    uint8_t type = 0;
    std::string p;
    if (!read(&type, &p) || type != kChallenge || p.size() != 16) return false;
    Nonce nl{}, nf{};
    memcpy(nl.data(), p.data(), nl.size());
    auth::fillNonce(std::span<uint8_t, 16>(nf.data(), 16));
    Digest m = proof(token, 'F', commId, nl, nf);
    Writer w;
    w.u64(commId);
    w.u32(static_cast<uint32_t>(nRanks));
    w.bytes(nf.data(), nf.size());
    w.bytes(m.data(), m.size());
    if (!send(kHello, w.b) || !read(&type, &p) || type != kWelcome || p.size() != 32) return false;
    return sameDigest(proof(token, 'L', commId, nl, nf), reinterpret_cast<const uint8_t*>(p.data()));
  }

 private:
  bool readAll(void* dst, size_t n, int ms) {
    auto* c = static_cast<char*>(dst);
    auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (n > 0) {
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      limit - std::chrono::steady_clock::now()).count());
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) <= 0) return false;
      ssize_t k = recv(fd_, c, n, 0);
      if (k <= 0) return false;
      c += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  int fd_ = -1;
  std::string name_;
};

// ---- payloads, as a member might write them (any values, the leader's checks are what is tested) ----

inline std::string members(const std::vector<int>& ranks) {
  Writer w;
  w.u32(static_cast<uint32_t>(ranks.size()));
  for (int r : ranks) w.u32(static_cast<uint32_t>(r));
  return w.b;
}

// A report of (c, b): `arms` arms (algorithm i % 7, protocol (i / 7) % 3), each `us` microseconds over `usable`
// samples; `duplicate` names the first arm twice.
inline std::string report(int c, int b, int arms, float us = 10, uint16_t usable = 4, bool duplicate = false) {
  std::vector<std::pair<int, int>> v;
  for (int i = 0; i < arms; ++i) v.push_back({i % 7, (i / 7) % 3});
  if (duplicate && !v.empty()) v.push_back(v.front());
  Writer w;
  w.u8(static_cast<uint8_t>(c));
  w.u8(static_cast<uint8_t>(b));
  w.u8(static_cast<uint8_t>(v.size()));
  for (auto [algo, proto] : v) {
    w.u8(static_cast<uint8_t>(algo));
    w.u8(static_cast<uint8_t>(proto));
    w.u8(static_cast<uint8_t>(usable));
    w.u8(static_cast<uint8_t>(usable >> 8));
    uint32_t bits;
    memcpy(&bits, &us, sizeof bits);
    w.u32(bits);
  }
  return w.b;
}

inline std::string u64(uint64_t v) {
  Writer w;
  w.u64(v);
  return w.b;
}

// START's fields: (s, h) and the decisions it carries; empty when the payload is not a START.
struct Start {
  uint64_t s = 0, h = 0;
};
inline bool parseStart(const std::string& p, Start* out) {
  Reader r{reinterpret_cast<const uint8_t*>(p.data()), p.size()};
  out->s = r.u64();
  out->h = r.u64();
  std::vector<AgreedDecision> ds;
  return getDecisions(r, &ds) && r.done();
}

// A registry secret from an explicit job key (the test's own process holds none in its settings).
inline Token registryTokenFor(const std::string& jobKey) {
  std::string m = derivation(kRegistryLabel, 0, 0);
  Digest d = hmacSha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(jobKey.data()), jobKey.size()),
                        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(m.data()), m.size()));
  Token t;
  memcpy(t.data(), d.data(), t.size());
  return t;
}

// `n` connections to `addr` that never say anything (a flood); they stay open until the vector is destroyed.
inline std::vector<std::unique_ptr<Wire>> idleConnections(const std::string& addr, int n) {
  std::vector<std::unique_ptr<Wire>> out;
  for (int i = 0; i < n; ++i) {
    auto w = std::make_unique<Wire>();
    if (w->connectTo(addr)) out.push_back(std::move(w));
  }
  return out;
}

}  // namespace icn::tuner::hostile
