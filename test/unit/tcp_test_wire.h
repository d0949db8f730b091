// What the TCP comm tests share: socketpairs standing in for a connection's sockets, the scripted peer's
// reads and writes, the records it sends, and the comm's close line.
#pragma once
#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "../reliability/log_capture.h"
#include "core/socket.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp::testwire {

using Clock = std::chrono::steady_clock;
inline constexpr const char* kPeer = "hostile-peer:4242";

// Messages sent before their clear-to-send on a helper lane (ICN_TCP_LANE_EAGER_BYTES) are off by default; these
// tests exercise them, so they turn them on (1 MiB) before the first setting is read, unless the environment
// already says.
inline const bool kLaneEagerOn = setenv("ICN_TCP_LANE_EAGER_BYTES", "1048576", 0) == 0;

// A connected TCP pair over loopback: our end (connected and writable) and the peer's (accepted).
inline void loopbackTcpPair(Fd* mine, Fd* theirs) {
  SockAddr any;
  auto* in = reinterpret_cast<sockaddr_in*>(&any.storage);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  any.len = sizeof(sockaddr_in);
  Fd listener;
  SockAddr bound;
  ASSERT_EQ(listenOn(any, &listener, &bound), Status::Ok);
  ASSERT_EQ(startConnect(bound, mine), Status::Ok);
  pollfd p{listener.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  *theirs = Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_GE(theirs->get(), 0);
  pollfd w{mine->get(), POLLOUT, 0};
  ASSERT_EQ(::poll(&w, 1, 5000), 1);
}

// The comm's sockets and the peer's ends of them: control, lane 0, then helper lanes. Over TCP (loopback) where a
// test needs what the kernel measures of a TCP socket (TCP_INFO), else socketpairs.
struct Wires {
  Sockets comm;
  std::vector<Fd> peer;
  explicit Wires(int helperLanes, bool overTcp = false) {
    for (int i = 0; i < 2 + helperLanes; i++) {
      Fd mine, theirs;
      if (overTcp) {
        loopbackTcpPair(&mine, &theirs);
      } else {
        int sv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        mine = Fd(sv[0]);
        theirs = Fd(sv[1]);
      }
      if (i == 0)
        comm.control = std::move(mine);
      else
        comm.lanes.push_back(std::move(mine));
      peer.push_back(std::move(theirs));
    }
  }
  int lane(int i) const { return peer[1 + i].get(); }
};

inline void writeAll(int fd, const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    ASSERT_GT(w, 0) << strerror(errno);
    b += w;
    n -= static_cast<size_t>(w);
  }
}

inline bool readAll(int fd, void* p, size_t n) {
  uint8_t* b = static_cast<uint8_t*>(p);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (n > 0 && Clock::now() < deadline) {
    pollfd q{fd, POLLIN, 100};
    if (::poll(&q, 1, 100) <= 0) continue;
    ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return n == 0;
}

inline void sendChunk(int fd, ChunkHeader h, const std::vector<uint8_t>& payload) {
  writeAll(fd, &h, sizeof h);
  if (h.length) writeAll(fd, payload.data() + h.offset, h.length);
}

inline ChunkHeader eager(uint32_t horizon, int tag, uint32_t size, uint32_t number = 0) {
  ChunkHeader h;
  h.flags = kChunkEager;
  h.seq = horizon;
  h.tag = tag;
  h.total = h.length = size;
  h.eager = number;
  return h;
}

inline ChunkHeader chunk(const CtsHeader& cts, int index, int tag, uint32_t total, uint32_t offset, uint32_t length) {
  ChunkHeader h;
  h.seq = cts.seq;
  h.slot = cts.slot;
  h.index = static_cast<uint8_t>(index);
  h.tag = tag;
  h.total = total;
  h.offset = offset;
  h.length = length;
  return h;
}

// Tests a request until it finishes; the status it ended with (Ok only when done).
inline Status finish(Request* r, int* sizes = nullptr) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    bool done = false;
    Status st = r->test(&done, sizes);
    if (st != Status::Ok || done) return st;
  }
  ADD_FAILURE() << "request neither finished nor failed within 10 s";
  return Status::InternalError;
}

inline std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(i * 7 + 1);
  return v;
}

// Bytes the process has allocated from the heap now (what a buffer grown on a peer's word would show).
inline size_t heapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}
inline constexpr size_t kHeapSlack = 1 << 20;  // log lines and the like

// The comm's end of lane 0 holds only a few records (an AF_UNIX socket counts each write's whole buffer).
inline void shrinkSendBuffer(const Fd& fd) {
  int bytes = 1;  // the kernel's minimum
  ASSERT_EQ(setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes), 0);
}

// Closes the comm and returns its close line (what the connection did), or "" when it wrote none.
template <class Comm>
std::string closeLine(std::unique_ptr<Comm>& comm) {
  testing::takeInfos();
  comm.reset();
  std::string found;
  for (auto& line : testing::takeInfos())
    if (line.find("closed:") != std::string::npos) found = line;
  return found;
}

// A count and a time in a close line, as `re` finds them (its two groups).
struct Waits {
  int count = 0;
  double ms = 0;
};
inline std::optional<Waits> waitsIn(const std::string& line, const std::regex& re) {
  std::smatch m;
  if (!std::regex_search(line, m, re)) return std::nullopt;
  return Waits{std::stoi(m[1]), std::stod(m[2])};
}

}  // namespace icn::tcp::testwire
