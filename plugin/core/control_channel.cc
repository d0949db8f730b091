#include "core/control_channel.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/coarse_clock.h"
#include "core/log.h"

namespace icn {
namespace {
constexpr uint8_t kFailureMagic = 0xF7;
constexpr uint8_t kMessageMagic = 0xF8;
constexpr size_t kMaxUnsent = 16 * 1024;
constexpr auto kPollPeriod = std::chrono::milliseconds(50);
}  // namespace

void ControlChannel::notifyFailure(const std::string& why) {
  if (notified_ || dead_ || !fd_.valid()) return;
  notified_ = true;
  flushOut();  // a message queued before the failure goes first (best effort)
  uint8_t msg[2 + 255];
  const size_t n = std::min<size_t>(why.size(), 255);
  msg[0] = kFailureMagic;
  msg[1] = uint8_t(n);
  memcpy(msg + 2, why.data(), n);
  // Best effort: a full socket buffer or a dead peer just means the peer learns of it by the close instead.
  (void)!::send(fd_.get(), msg, 2 + n, MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd_.get(), SHUT_WR);
}

bool ControlChannel::sendMessage(std::span<const uint8_t> payload) {
  if (dead_ || notified_ || !fd_.valid() || payload.size() > kMaxMessage) return false;
  if (out_.size() + payload.size() + 3 > kMaxUnsent) return false;
  out_.push_back(kMessageMagic);
  out_.push_back(uint8_t(payload.size() & 0xff));
  out_.push_back(uint8_t(payload.size() >> 8));
  out_.insert(out_.end(), payload.begin(), payload.end());
  return flushOut();
}

bool ControlChannel::flushOut() {
  while (!out_.empty()) {
    ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(out_.begin(), out_.begin() + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // the rest goes on a later call
  }
  return true;
}

bool ControlChannel::nextMessage(std::vector<uint8_t>* out) {
  if (inbox_.empty()) return false;
  *out = std::move(inbox_.front());
  inbox_.pop_front();
  return true;
}

bool ControlChannel::parseFrames(std::string* why) {
  size_t off = 0;
  while (off < in_.size()) {
    const uint8_t* f = in_.data() + off;
    const size_t have = in_.size() - off;
    if (f[0] == kFailureMagic) {
      if (have < 2 || have < 2 + size_t(f[1])) break;
      std::string text(reinterpret_cast<const char*>(f + 2), f[1]);
      for (char& c : text)  // the peer's words reach our log: printable ASCII only
        if (c < 0x20 || c > 0x7e) c = '?';
      *why = "peer reports: " + text;
      return false;
    }
    if (f[0] != kMessageMagic || !messages_) {
      *why = "unexpected data on the control connection";
      return false;
    }
    if (have < 3) break;
    const size_t len = size_t(f[1]) | size_t(f[2]) << 8;
    if (len > kMaxMessage) {
      *why = "control message of " + std::to_string(len) + " bytes (at most " + std::to_string(kMaxMessage) + ")";
      return false;
    }
    if (have < 3 + len) break;
    if (inbox_.size() >= kMaxInbox) {
      *why = "more than " + std::to_string(kMaxInbox) + " control messages unread";
      return false;
    }
    inbox_.emplace_back(f + 3, f + 3 + len);
    off += 3 + len;
  }
  in_.erase(in_.begin(), in_.begin() + off);
  return true;
}

Status ControlChannel::die(const std::string& why) {
  dead_ = true;
  deadReason_ = why;
  ICN_WARN(subsys::Net, "peer %s is gone: %s", peerName_.c_str(), why.c_str());
  return Status::RemoteError;
}

Status ControlChannel::checkAlive() {
  if (dead_) return Status::RemoteError;
  auto now = coarseNow();
  if (now - lastPoll_ < kPollPeriod) return Status::Ok;
  lastPoll_ = now;
  if (!out_.empty() && !notified_ && !flushOut()) return die(std::string("control connection: ") + strerror(errno));
  pollfd p{fd_.get(), POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) == 0) return Status::Ok;
  for (;;) {
    uint8_t b[2048];
    ssize_t n = ::recv(fd_.get(), b, sizeof b, MSG_DONTWAIT);
    if (n > 0) {
      in_.insert(in_.end(), b, b + n);
      std::string why;
      if (!parseFrames(&why)) return die(why);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok;
    int err = n < 0 ? errno : 0;
    socklen_t len = sizeof err;
    if (!err) getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    return die(err ? strerror(err) : "peer closed its control connection (process exited or was killed)");
  }
}

}  // namespace icn
