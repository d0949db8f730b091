// What the TCP transport's stateful fuzzers share: the input read as a script of peer actions (with a bias to
// plausible values), the bytes a scripted peer writes (queued when the socket is full, never blocking), the
// content every message carries (so a completed message can be checked byte by byte) and the abort that
// reports a broken invariant.
#pragma once
#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

#include "core/log.h"
#include "core/net_counters.h"
#include "core/transport.h"

namespace icn::fuzz {

using Clock = std::chrono::steady_clock;

// A broken invariant: says which, then aborts (libFuzzer keeps the input as a crash).
[[noreturn]] __attribute__((format(printf, 1, 2))) inline void broken(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "INVARIANT BROKEN: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}

// ICN_FUZZ_TRACE=1: the harness says what happened (completions, failures, comms made), to check a seed by hand.
inline bool tracing() {
  static const bool on = getenv("ICN_FUZZ_TRACE") != nullptr;
  return on;
}
#define ICN_FUZZ_TRACE(...)                      \
  do {                                           \
    if (::icn::fuzz::tracing()) {                \
      fprintf(stderr, "trace: " __VA_ARGS__);    \
      fprintf(stderr, "\n");                     \
    }                                            \
  } while (0)

// Refusals of hostile input are expected by the thousand: no log lines while fuzzing (ICN_FUZZ_LOG=1 shows them).
// One kind of WARN is a finding whatever the input: a system call refusing our own memory (EFAULT) means the comm
// handed the kernel an address outside what it owns.
inline void fuzzSink(int level, unsigned long, const char*, int, const char* fmt, ...) {
  static const bool show = getenv("ICN_FUZZ_LOG") != nullptr;
  if (strcmp(fmt, "ICN %s") != 0) return;  // logf formats the message and passes it as the one argument
  va_list ap;
  va_start(ap, fmt);
  const char* msg = va_arg(ap, const char*);
  va_end(ap);
  if (show) fprintf(stderr, "ICN %s %s\n", level == 2 ? "WARN" : "INFO", msg);
  // (A failure notice's text is the peer's: it may say anything.)
  if (level == 2 && strstr(msg, "Bad address") && !strstr(msg, "peer reports:"))
    broken("a system call was handed memory we do not own: %s", msg);
}
inline void quietLogs() { setLogSink(&fuzzSink); }

// Every comm registers its counters; closed ones stay listed up to a bound. Filling that list once, before the
// first input, keeps each input's allocations balanced, so libFuzzer does not run a leak check after every one.
inline void fillCounterRegistry() {
  for (int i = 0; i < 1100; i++) {
    NetCommInfo info;
    info.peer = "fuzz-warm-up";
    netstats::unregisterComm(netstats::registerComm(info));
  }
}

// What NCCL does with every comm before it moves data: registers host memory (device memory is refused) and, on
// the receive side, flushes (a no-op for host memory). Outcomes are fixed: anything else is a finding.
template <class Comm>
void registerAsNccl(Comm& comm) {
  uint8_t buf[64];
  void* mh = nullptr;
  if (comm.regMr(buf, sizeof buf, kMemHost, &mh) != Status::Ok || !mh || comm.deregMr(mh) != Status::Ok)
    broken("regMr/deregMr of host memory failed");
  if (comm.regMrDmaBuf(buf, sizeof buf, kMemHost, 0, -1, &mh) != Status::Ok || comm.deregMr(mh) != Status::Ok)
    broken("regMrDmaBuf/deregMr of host memory failed");
  if (comm.regMr(buf, sizeof buf, kMemCuda, &mh) != Status::InvalidArgument) broken("regMr took device memory");
}

// The fuzzer's bytes read front to back; reads past the end give zeros (the script ends at done()).
class Input {
 public:
  Input(const uint8_t* data, size_t size, size_t pos = 0) : data_(data), size_(size), pos_(pos) {}
  bool done() const { return pos_ >= size_; }
  size_t pos() const { return pos_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(byte() | byte() << 8); }
  uint32_t u32() { return u16() | uint32_t{u16()} << 16; }
  // One of `plausible` for most selector bytes; for the top 16 selectors, four raw bytes from the input.
  uint32_t pick(std::initializer_list<uint32_t> plausible) {
    const uint8_t sel = byte();
    if (sel >= 0xF0 || plausible.size() == 0) return u32();
    return plausible.begin()[sel % plausible.size()];
  }
  // Up to n bytes (fewer at the end of the input).
  std::span<const uint8_t> bytes(size_t n) {
    n = std::min(n, size_ - std::min(pos_, size_));
    std::span<const uint8_t> out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  // The same bytes from an earlier position (a repeated action decodes its arguments again).
  Input at(size_t pos) const { return Input(data_, size_, pos); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_;
};

// The byte at `offset` of the message named `key`; never kPoison, so bytes nobody sent stand out. These loops
// run over every payload byte: left out of the coverage instrumentation, which would only slow them down.
#define ICN_FUZZ_UNINSTRUMENTED __attribute__((noinline, no_sanitize("coverage")))
constexpr uint8_t kPoison = 0x3C;
inline uint8_t content(uint32_t key, uint32_t offset) {
  uint32_t x = key * 0x9E3779B1u ^ (offset + 1) * 0x85EBCA77u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 13;
  return static_cast<uint8_t>((x & 0x7f) | 0x80);
}
ICN_FUZZ_UNINSTRUMENTED inline void fillContent(uint8_t* p, uint32_t key, uint32_t offset, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = content(key, offset + static_cast<uint32_t>(i));
}
// Index of the first byte of [p, p + n) that differs from the content of `key` from `offset`, or n.
ICN_FUZZ_UNINSTRUMENTED inline size_t firstDiff(const uint8_t* p, uint32_t key, uint32_t offset, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != content(key, offset + static_cast<uint32_t>(i))) return i;
  return n;
}
// Index of the first byte of [p, p + n) that is not kPoison, or n.
ICN_FUZZ_UNINSTRUMENTED inline size_t firstWritten(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != kPoison) return i;
  return n;
}

// One end of a connection that the scripted peer holds. Writes queue and go out as the socket takes them, so
// the harness never blocks on a comm that stopped reading; at most kMaxQueued bytes wait.
class PeerSocket {
 public:
  static constexpr size_t kMaxQueued = 4 << 20;
  PeerSocket() = default;
  explicit PeerSocket(int fd) : fd_(fd) {}
  PeerSocket(PeerSocket&& o) noexcept { *this = std::move(o); }
  PeerSocket& operator=(PeerSocket&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = o.fd_;
      o.fd_ = -1;
      out_ = std::move(o.out_);
      off_ = o.off_;
      written_ = o.written_;
      broken_ = o.broken_;
    }
    return *this;
  }
  ~PeerSocket() { close(); }
  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  bool broken() const { return broken_; }
  uint64_t written() const { return written_; }
  size_t queued() const { return out_.size() - off_; }
  // Queues bytes (false, nothing queued, when the socket is closed or the queue would pass its bound).
  bool write(std::span<const uint8_t> b) {
    if (fd_ < 0 || broken_ || queued() + b.size() > kMaxQueued) return false;
    if (queued() == 0) b = b.subspan(sendNow(b.data(), b.size()));  // most writes fit: no copy
    out_.insert(out_.end(), b.begin(), b.end());
    return true;
  }
  bool write(const void* p, size_t n) { return write({static_cast<const uint8_t*>(p), n}); }
  // Writes what the socket takes now; true when something went out.
  bool flush() {
    const size_t n = sendNow(out_.data() + off_, out_.size() - off_);
    off_ += n;
    if (off_ == out_.size() || broken_) {
      out_.clear();
      off_ = 0;
    }
    return n > 0;
  }
  // Reads what is there now into `in` (at most `cap` bytes held); false at end of stream or on an error.
  bool read(std::vector<uint8_t>* in, size_t cap) {
    while (fd_ >= 0) {
      uint8_t buf[16384];
      const size_t room = cap > in->size() ? cap - in->size() : 0;
      if (room == 0) return true;
      ssize_t r = ::recv(fd_, buf, std::min(room, sizeof buf), MSG_DONTWAIT);
      if (r > 0) {
        in->insert(in->end(), buf, buf + r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
    return false;
  }
  void shutdown(int how) {
    if (fd_ >= 0) ::shutdown(fd_, how);
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    out_.clear();
    off_ = 0;
  }

 private:
  // Sends what the socket takes without blocking; how much went.
  size_t sendNow(const uint8_t* p, size_t n) {
    size_t sent = 0;
    while (fd_ >= 0 && !broken_ && sent < n) {
      ssize_t w = ::send(fd_, p + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        sent += static_cast<size_t>(w);
        written_ += static_cast<uint64_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      broken_ = true;  // the comm closed its end: what is queued is lost, as it would be
    }
    return sent;
  }

  int fd_ = -1;
  std::vector<uint8_t> out_;
  size_t off_ = 0;
  uint64_t written_ = 0;
  bool broken_ = false;
};

// Shrinks a socket's buffers (the kernel clamps to its minimum).
inline void shrinkBuffers(int fd, int bytes, bool send, bool recv) {
  if (send) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  if (recv) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

// Bytes waiting in a socket's receive queue.
inline int unread(int fd) {
  int n = 0;
  return ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

// Lets helper threads move what they have: returns once no socket in `fds` changed its unread byte count for
// 300 us (a lane holding a message leaves it there) or, with untilEmpty, as soon as all are empty; gives up after
// `budget` (counted down across calls, so one input spends a bounded time waiting).
inline void settle(std::span<const int> fds, std::chrono::microseconds* budget, bool untilEmpty = true) {
  if (fds.empty() || budget->count() <= 0) return;
  const auto start = Clock::now();
  auto lastMove = start;
  std::vector<int> last(fds.size(), -1);
  for (;;) {
    bool empty = true, moved = false;
    for (size_t i = 0; i < fds.size(); i++) {
      const int n = unread(fds[i]);
      empty = empty && n == 0;
      moved = moved || n != last[i];
      last[i] = n;
    }
    const auto now = Clock::now();
    if (moved) lastMove = now;
    if ((untilEmpty && empty) || now - lastMove > std::chrono::microseconds(300) || now - start > *budget) break;
    usleep(20);
  }
  *budget -= std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

// Positions of the last actions decoded, so that a repeat action can run them again.
class History {
 public:
  static constexpr size_t kDepth = 8;
  void note(size_t pos) {
    pos_[n_ % kDepth] = pos;
    n_++;
  }
  size_t size() const { return std::min(n_, kDepth); }
  // The k-th last (0: the latest).
  size_t last(size_t k) const { return pos_[(n_ - 1 - k) % kDepth]; }

 private:
  size_t pos_[kDepth] = {};
  size_t n_ = 0;
};

// Runs the script: `one(op, input)` performs action `op` (< ops), reading its arguments from `input`. Action
// `repeatOp` runs the last k (<= 8) actions again, r (<= 128) times, with the arguments they had. At most
// `maxActions` run, and none starts after kScriptSeconds (far below libFuzzer's -timeout, even on a loaded
// machine: the script stops, the comm is closed as usual).
constexpr int kScriptSeconds = 2;
template <class F>
void runScript(Input& in, uint8_t ops, uint8_t repeatOp, int maxActions, F&& one) {
  History history;
  int budget = maxActions;
  const auto deadline = Clock::now() + std::chrono::seconds(kScriptSeconds);
  auto timeLeft = [&] {
    if (Clock::now() < deadline) return true;
    budget = 0;
    return false;
  };
  while (!in.done() && budget > 0 && timeLeft()) {
    const size_t at = in.pos();
    const uint8_t op = in.byte() % ops;
    if (op != repeatOp) {
      history.note(at);
      one(op, in);
      budget--;
      continue;
    }
    const size_t k = std::min<size_t>(1 + in.byte() % History::kDepth, history.size());
    const int times = 1 + in.byte() % 128;
    std::vector<size_t> starts;
    for (size_t i = k; i > 0; i--) starts.push_back(history.last(i - 1));
    for (int t = 0; t < times && budget > 0; t++) {
      for (size_t s : starts) {
        if (budget-- <= 0 || !timeLeft()) break;
        Input again = in.at(s);
        const uint8_t o = again.byte() % ops;
        one(o, again);
      }
    }
  }
}

}  // namespace icn::fuzz
