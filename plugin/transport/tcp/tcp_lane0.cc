#include "transport/tcp/tcp_lane0.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "core/log.h"

namespace icn::tcp {
namespace {

enum class Io { Moved, Empty, Ended, Failed };

// One non-blocking recv: Moved (*n bytes), Empty (nothing there), Ended (the peer closed) or Failed (*why).
Io recvSome(int fd, uint8_t* buf, size_t len, size_t* n, std::string* why) {
  for (;;) {
    const ssize_t r = ::recv(fd, buf, len, MSG_DONTWAIT);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return Io::Moved;
    }
    if (r == 0) return Io::Ended;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::Empty;
    if (errno == EINTR) continue;
    *why = std::string("recv: ") + strerror(errno);
    return Io::Failed;
  }
}

}  // namespace

Status SocketSource::read(uint8_t* buf, size_t n, size_t* got, bool* closed, std::string* why) {
  *got = 0;
  *closed = false;
  switch (recvSome(fd_, buf, n, got, why)) {
    case Io::Ended: *closed = true; return Status::Ok;
    case Io::Failed: return Status::RemoteError;
    default: return Status::Ok;
  }
}

Lane0Mirror::Lane0Mirror(std::array<int, kCopies> fds, std::array<std::string, kCopies> rails, size_t ringBytes,
                         std::string peer)
    : cap_(ringBytes), peer_(std::move(peer)) {
  for (size_t c = 0; c < kCopies; c++) {
    copies_[c].fd = fds[c];
    copies_[c].rail = std::move(rails[c]);
  }
}

int Lane0Mirror::liveCopies() const {
  int n = 0;
  for (const Copy& c : copies_) n += c.live;
  return n;
}

uint64_t Lane0Mirror::lowestWritten() const {
  uint64_t low = queued_;
  for (const Copy& c : copies_)
    if (writing(c)) low = std::min(low, c.written);
  return low;
}

bool Lane0Mirror::pending() const {
  for (const Copy& c : copies_)
    if (c.joining ? c.live : writing(c) && c.written < queued_) return true;
  return false;
}

void Lane0Mirror::drop(int index, const std::string& why, bool failed) {
  Copy& c = copies_[static_cast<size_t>(index)];
  if (!c.live) return;
  c.live = false;
  ::shutdown(c.fd, SHUT_RDWR);  // the peer reads the end of this copy and drops it too
  if (failed) {
    ended_ = false;
    lastError_ = "lane 0 over " + c.rail + ": " + why;
  }
  const Copy& o = other(c);
  // A copy the peer ended needs no word: the peer is closing, or it dropped the copy itself and said why.
  if (failed && o.live)
    ICN_WARN(subsys::Net, "TCP connection with %s: lane 0 over %s: %s; lane 0 goes on over %s alone", peer_.c_str(),
             c.rail.c_str(), why.c_str(), o.rail.c_str());
}

size_t Lane0Mirror::append(const void* p, size_t n) {
  if (liveCopies() == 0) return 0;
  const size_t room = cap_ - static_cast<size_t>(queued_ - lowestWritten());
  const size_t take = std::min(n, room);
  if (take == 0) return 0;
  if (!ring_) ring_.reset(new uint8_t[cap_]);
  const size_t at = static_cast<size_t>(queued_ % cap_);
  const size_t first = std::min(take, cap_ - at);
  memcpy(ring_.get() + at, p, first);
  memcpy(ring_.get(), static_cast<const uint8_t*>(p) + first, take - first);
  queued_ += take;
  return take;
}

void Lane0Mirror::writeCopy(Copy& c) {
  while (c.written < queued_) {
    const size_t at = static_cast<size_t>(c.written % cap_);
    const size_t len = static_cast<size_t>(queued_ - c.written);
    const size_t first = std::min(len, cap_ - at);
    iovec iov[2] = {{ring_.get() + at, first}, {ring_.get(), len - first}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = len > first ? 2 : 1;
    const ssize_t w = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.written += static_cast<uint64_t>(w);
      furthest_ = std::max(furthest_, c.written);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (w < 0 && errno == EINTR) continue;
    drop(static_cast<int>(&c - copies_.data()), std::string("send: ") + (w < 0 ? strerror(errno) : "wrote nothing"),
         true);
    break;
  }
}

// A copy that holds the ring full while the other is half a ring ahead is on a rail that is down or far slower:
// waiting for it would hold lane 0 to its pace, and the other copy has every byte. Two copies close together
// with the ring full wait: then the peer is not reading, which the caller's own watch judges.
void Lane0Mirror::dropLaggard() {
  if (!writing(copies_[0]) || !writing(copies_[1])) return;
  Copy& lag = copies_[0].written <= copies_[1].written ? copies_[0] : copies_[1];
  const Copy& lead = other(lag);
  if (queued_ - lag.written < cap_ || lead.written - lag.written < cap_ / 2) return;
  drop(static_cast<int>(&lag - copies_.data()),
       "fell " + std::to_string((lead.written - lag.written) / 1024) + " KiB behind the copy over " + lead.rail +
           " (its rail is down or far slower)",
       true);
}

Status Lane0Mirror::flush(std::string* why) {
  for (Copy& c : copies_)
    if (c.live && c.joining && haveStart(c)) speak(c);  // the peer's start came: our answer
  for (Copy& c : copies_)
    if (writing(c) && c.written < queued_) writeCopy(c);
  dropLaggard();
  if (liveCopies() > 0) return Status::Ok;
  *why = ended_ ? "send: the peer closed lane 0 over every rail" : lastError_;
  return Status::RemoteError;
}

void Lane0Mirror::readmit(int index, int fd, bool speakFirst) {
  Copy& c = copies_[static_cast<size_t>(index)];
  c = Copy{fd, c.rail};
  c.startGot = 0;
  c.joining = true;
  if (speakFirst) speak(c);
}

void Lane0Mirror::speak(Copy& c) {
  const uint64_t from = lowestWritten();  // the oldest byte the ring holds (c does not count yet)
  uint8_t pos[8];
  for (int i = 0; i < 8; i++) pos[i] = static_cast<uint8_t>(from >> (8 * i));
  // The copy's buffer is empty: the 8 bytes go at once, or the socket has already failed.
  const ssize_t w = ::send(c.fd, pos, sizeof pos, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w != static_cast<ssize_t>(sizeof pos)) {
    drop(static_cast<int>(&c - copies_.data()),
         std::string("send: ") + (w < 0 ? strerror(errno) : "its start position did not fit"), true);
    return;
  }
  c.written = from;
  c.joining = false;
}

bool Lane0Mirror::haveStart(Copy& c) {
  while (c.live && c.startGot < sizeof c.start) {
    size_t n = 0;
    std::string why;
    switch (recvSome(c.fd, c.start + c.startGot, sizeof c.start - c.startGot, &n, &why)) {
      case Io::Moved: c.startGot += n; break;
      case Io::Empty: return false;
      case Io::Ended: drop(static_cast<int>(&c - copies_.data()), "ended by the peer", false); return false;
      case Io::Failed: drop(static_cast<int>(&c - copies_.data()), why, true); return false;
    }
    if (c.startGot == sizeof c.start) {
      c.read = 0;
      for (int i = 0; i < 8; i++) c.read |= uint64_t{c.start[i]} << (8 * i);
    }
  }
  return c.live;
}

void Lane0Mirror::skipBehind(Copy& c) {
  uint8_t scratch[16384];
  if (!haveStart(c)) return;
  while (c.live && c.read < consumed_) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof scratch, consumed_ - c.read));
    size_t n = 0;
    std::string why;
    switch (recvSome(c.fd, scratch, want, &n, &why)) {
      case Io::Moved: c.read += n; break;
      case Io::Empty: return;
      case Io::Ended: drop(static_cast<int>(&c - copies_.data()), "ended by the peer", false); return;
      case Io::Failed: drop(static_cast<int>(&c - copies_.data()), why, true); return;
    }
  }
}

namespace {
// Reads that look at the lead copy alone between two that look at both, and how far the other copy may hold bytes
// already read from the lead before it is drained regardless.
constexpr int kLeadOnlyReads = 8;
constexpr uint64_t kDrainBehindBytes = 4 * 1024;
// Reads after the last bytes came that still look at both copies: while bytes stream, either copy may be ahead.
constexpr int kStreamingReads = 64;
}  // namespace

// Most reads find nothing (the caller polls); looking at both sockets each time would double their cost. While bytes
// stream (the last kStreamingReads reads brought some) both copies are read, whichever is ahead. Once quiet, the
// lead copy (the one that brought the last bytes) is read every time; the other every kLeadOnlyReads reads, when it
// holds kDrainBehindBytes of duplicates, and whenever the lead is not readable (dropped, or re-admitted and its
// start position not known yet). Its duplicates wait in its socket meanwhile, a few KiB, far under what a socket
// holds, so the sender never sees that copy fall behind (the peer's ring may be as small as 64 KiB, its laggard
// bound half that). A lead that died costs at most kLeadOnlyReads polls before the other copy takes over.
bool Lane0Mirror::everyCopyNow() {
  const Copy& lead = copies_[static_cast<size_t>(lead_)];
  const Copy& o = other(lead);
  const bool must = !lead.live || lead.startGot < sizeof lead.start || lead.read != consumed_ ||
                    quietReads_ < kStreamingReads ||
                    (o.live && consumed_ - std::min(o.read, consumed_) >= kDrainBehindBytes);
  if (must || ++leadOnly_ >= kLeadOnlyReads) {
    leadOnly_ = 0;
    return true;
  }
  return false;
}

Status Lane0Mirror::read(uint8_t* buf, size_t n, size_t* got, bool* closed, std::string* why) {
  *got = 0;
  *closed = false;
  const int looks = everyCopyNow() ? kCopies : 1;
  for (int k = 0; k < looks; k++) skipBehind(copies_[static_cast<size_t>((lead_ + k) % kCopies)]);
  for (int k = 0; k < looks; k++) {
    const int index = (lead_ + k) % kCopies;
    Copy& c = copies_[static_cast<size_t>(index)];
    if (!c.live || c.startGot < sizeof c.start || c.read != consumed_) continue;
    std::string err;
    switch (recvSome(c.fd, buf, n, got, &err)) {
      case Io::Moved:
        c.read += *got;
        consumed_ += *got;
        lead_ = index;
        quietReads_ = 0;
        return Status::Ok;
      case Io::Empty: break;
      case Io::Ended: drop(static_cast<int>(&c - copies_.data()), "ended by the peer", false); break;
      case Io::Failed: drop(static_cast<int>(&c - copies_.data()), err, true); break;
    }
  }
  quietReads_ = std::min(quietReads_ + 1, kStreamingReads);
  // Every live copy starts past what was read: the bytes between went with a copy that failed.
  bool behind = false, waiting = false;
  uint64_t gapEnd = UINT64_MAX;
  for (const Copy& c : copies_) {
    if (!c.live) continue;
    waiting = waiting || c.startGot < sizeof c.start;
    behind = behind || (c.startGot == sizeof c.start && c.read <= consumed_);
    if (c.startGot == sizeof c.start) gapEnd = std::min(gapEnd, c.read);
  }
  if (liveCopies() > 0 && !behind && !waiting) {
    *why = "lane 0: bytes " + std::to_string(consumed_) + " to " + std::to_string(gapEnd) +
           " of the peer's stream went with a copy that failed, and the copy left starts after them";
    return Status::RemoteError;
  }
  if (liveCopies() > 0) return Status::Ok;
  if (ended_) {
    *closed = true;
    return Status::Ok;
  }
  *why = lastError_;
  return Status::RemoteError;
}

void Lane0Mirror::drain() {
  uint8_t sink[4096];
  for (Copy& c : copies_) {
    std::string why;
    size_t n = 0;
    for (int i = 0; i < 64 && c.live && recvSome(c.fd, sink, sizeof sink, &n, &why) == Io::Moved; i++) {
    }
  }
}

}  // namespace icn::tcp
