// A hand-driven end of a handshake socket: writes arbitrary bytes and reads frames, so tests can play a
// broken, hostile or differently-keyed peer against the real Handshake state machine.
#pragma once
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "core/handshake.h"
#include "core/wire.h"

namespace icn::testing {

struct RawFrame {
  uint16_t type = 0;
  std::vector<uint8_t> payload;
};

class RawPeer {
 public:
  explicit RawPeer(int fd) : fd_(fd) {}
  ~RawPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;
  bool send(std::span<const uint8_t> b) {
    size_t off = 0;
    while (off < b.size()) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, 2000) <= 0) return false;
      ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) off += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    }
    return true;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads one whole frame, driving `pump` (the real side's progress) while waiting.
  template <typename Pump>
  std::optional<RawFrame> readFrame(Pump&& pump, std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      pump();
      uint8_t buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) in_.insert(in_.end(), buf, buf + n);
      if (n == 0) return std::nullopt;
      if (in_.size() >= 12) {
        WireReader r(std::span<const uint8_t>(in_.data(), 12));
        uint32_t magic, len;
        uint16_t version, type;
        r.get(&magic), r.get(&version), r.get(&type), r.get(&len);
        if (in_.size() >= 12 + len) {
          RawFrame f{type, std::vector<uint8_t>(in_.begin() + 12, in_.begin() + 12 + len)};
          in_.erase(in_.begin(), in_.begin() + 12 + len);
          return f;
        }
      }
      if (n < 0) usleep(1000);
    }
    return std::nullopt;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
  std::vector<uint8_t> in_;
};

// Frame header with arbitrary fields (for wrong magic / version / type / length).
inline std::vector<uint8_t> rawHeader(uint32_t magic, uint16_t version, uint16_t type, uint32_t len) {
  WireWriter w;
  w.put(magic), w.put(version), w.put(type), w.put(len);
  return std::move(w.buffer());
}

}  // namespace icn::testing
