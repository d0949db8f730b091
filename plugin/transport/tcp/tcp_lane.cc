#include "transport/tcp/tcp_lane.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "core/params.h"

namespace icn::tcp {

namespace {
// Helpers re-check their stop flag at least this often, whatever poll() says.
constexpr int kPollMs = 1000;

void nameThread(const char* role, int index) {
  char name[16];
  snprintf(name, sizeof name, "icn-tcp-%s%d", role, index);
  pthread_setname_np(pthread_self(), name);
}
}  // namespace

void FailureState::fail(Status s, const std::string& why) {
  std::lock_guard lk(mu_);
  if (status_.load(std::memory_order_relaxed) != 0) return;
  ICN_WARN(subsys::Net, "TCP connection with %s failed: %s", peer_.c_str(), why.c_str());
  status_.store(static_cast<int>(s), std::memory_order_release);
}

void tuneLane(int fd) {
  int bytes = static_cast<int>(params::getInt(params::Id::TcpSockbufBytes));
  if (bytes <= 0) return;  // kernel autotuning
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

Status writeSome(int fd, SendJob& job, bool* done, std::string* why) {
  constexpr size_t kHeader = sizeof(ChunkHeader);
  const size_t total = kHeader + job.header.length;
  *done = false;
  while (job.sent < total) {
    iovec iov[2];
    int n = 0;
    if (job.sent < kHeader) {
      iov[n++] = {reinterpret_cast<uint8_t*>(&job.header) + job.sent, kHeader - job.sent};
      if (job.header.length) iov[n++] = {const_cast<uint8_t*>(job.data), job.header.length};
    } else {
      const size_t off = job.sent - kHeader;
      iov[n++] = {const_cast<uint8_t*>(job.data) + off, job.header.length - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      job.sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok;
    if (w < 0 && errno == EINTR) continue;
    *why = std::string("send: ") + (w < 0 ? strerror(errno) : "wrote nothing");
    return Status::RemoteError;
  }
  *done = true;
  return Status::Ok;
}

SendHelper::SendHelper(Fd fd, FailureState& failure, int index)
    : fd_(std::move(fd)), failure_(failure), index_(index), thread_([this] { run(); }) {}

SendHelper::~SendHelper() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  stopping_.store(true);
  cv_.notify_one();
  ::shutdown(fd_.get(), SHUT_RDWR);  // wakes a helper waiting for room in the socket
  thread_.join();
}

void SendHelper::push(const ChunkHeader& h, const uint8_t* data, std::atomic<int>* pending) {
  bool wake;
  {
    std::lock_guard lk(mu_);
    SendJob& j = ring_[tail_ % kCapacity];
    j.header = h;
    j.data = data;
    j.pending = pending;
    j.sent = 0;
    wake = head_ == tail_;
    tail_++;
  }
  if (wake) cv_.notify_one();
}

void SendHelper::run() {
  nameThread("s", index_);
  for (;;) {
    SendJob* job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || head_ != tail_; });
      if (stop_) return;
      job = &ring_[head_ % kCapacity];  // stays put: push() only writes past tail_
    }
    for (;;) {
      bool done = false;
      std::string why;
      if (writeSome(fd_.get(), *job, &done, &why) != Status::Ok) {
        if (!stopping_.load()) failure_.fail(Status::RemoteError, "lane " + std::to_string(index_) + ": " + why);
        return;
      }
      if (done) break;
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, kPollMs);
      if (stopping_.load()) return;
    }
    std::atomic<int>* pending = job->pending;
    {
      std::lock_guard lk(mu_);
      head_++;
    }
    pending->fetch_sub(1, std::memory_order_release);
  }
}

Status ChunkReader::pump(int fd, ChunkSink& sink, bool* eof, bool* held, std::string* why) {
  *eof = false;
  *held = false;
  bool drained = false;  // a read came back short: the socket is (most likely) empty, stop before an EAGAIN
  // Reads into [buf, buf + n): Ok with *got > 0, or Ok with *got == 0 when nothing is there (or at EOF: *closed).
  auto read = [&](uint8_t* buf, size_t n, size_t* got, bool* closed) {
    *got = 0;
    *closed = false;
    if (drained) return Status::Ok;
    for (;;) {
      ssize_t r = ::recv(fd, buf, n, MSG_DONTWAIT);
      if (r > 0) {
        *got = static_cast<size_t>(r);
        drained = *got < n;
        return Status::Ok;
      }
      if (r == 0) {
        *closed = true;
        return Status::Ok;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        drained = true;
        return Status::Ok;
      }
      if (errno == EINTR) continue;
      *why = std::string("recv: ") + strerror(errno);
      return Status::RemoteError;
    }
  };
  for (;;) {
    size_t got = 0;
    bool closed = false;
    if (holding_) {  // ask again for the held message's receive
      ChunkHeader h;
      memcpy(&h, header_, sizeof h);
      ICN_CHECK(sink.land(h, lane0_, &landing_, why));
      if (landing_.held) {
        *held = true;
        return Status::Ok;
      }
      holding_ = false;
      if (landing_.length == 0) {
        sink.landed(landing_, true);
        continue;
      }
      inPayload_ = true;
      got_ = 0;
    }
    if (!inPayload_) {
      if (pos_ == len_) {
        ICN_CHECK(read(stage_.get(), cap_, &got, &closed));
        if (closed && headerGot_ == 0) {
          *eof = true;
          return Status::Ok;
        }
        if (closed) {
          *why = "connection closed in the middle of a message header";
          return Status::RemoteError;
        }
        if (got == 0) return Status::Ok;
        pos_ = 0;
        len_ = got;
      }
      const size_t take = std::min(sizeof header_ - headerGot_, len_ - pos_);
      memcpy(header_ + headerGot_, stage_.get() + pos_, take);
      pos_ += take;
      headerGot_ += take;
      if (headerGot_ < sizeof header_) continue;
      headerGot_ = 0;
      ChunkHeader h;
      memcpy(&h, header_, sizeof h);
      landing_.held = false;
      ICN_CHECK(sink.land(h, lane0_, &landing_, why));
      if (landing_.held) {
        holding_ = true;
        *held = true;
        return Status::Ok;
      }
      if (landing_.length == 0) {
        sink.landed(landing_, true);
        continue;
      }
      inPayload_ = true;
      got_ = 0;
    }
    if (pos_ < len_) {
      const size_t take = std::min<size_t>(landing_.length - got_, len_ - pos_);
      memcpy(landing_.dest + got_, stage_.get() + pos_, take);
      pos_ += take;
      got_ += take;
    } else {
      ICN_CHECK(read(landing_.dest + got_, landing_.length - got_, &got, &closed));
      if (closed) {
        *why = "connection closed in the middle of a message";
        return Status::RemoteError;
      }
      if (got == 0) return Status::Ok;
      got_ += got;
    }
    if (got_ == landing_.length) {
      inPayload_ = false;
      sink.landed(landing_, true);
    }
  }
}

void ChunkReader::abandon(ChunkSink& sink) {
  if (inPayload_) sink.landed(landing_, false);
  inPayload_ = false;
}

RecvHelper::RecvHelper(Fd fd, ChunkSink& sink, FailureState& failure, std::atomic<int>& closedLanes, int index)
    : fd_(std::move(fd)),
      sink_(sink),
      failure_(failure),
      closedLanes_(closedLanes),
      index_(index),
      thread_([this] { run(); }) {}

RecvHelper::~RecvHelper() {
  stopping_.store(true);
  ::shutdown(fd_.get(), SHUT_RDWR);  // wakes the helper's poll(); it then sees EOF or the flag
  sink_.wake();                      // and a helper holding an eager message
  thread_.join();
}

void RecvHelper::run() {
  nameThread("r", index_);
  for (;;) {
    bool eof = false, held = false;
    std::string why;
    const uint64_t seen = sink_.changes();  // before asking: a post after this wakes the wait below
    Status st = reader_.pump(fd_.get(), sink_, &eof, &held, &why);
    if (st != Status::Ok || eof || stopping_.load()) {
      reader_.abandon(sink_);
      if (st != Status::Ok && !stopping_.load())
        failure_.fail(st, "lane " + std::to_string(index_) + ": " + why);
      if (eof) closedLanes_.fetch_add(1);
      return;
    }
    if (held) {
      sink_.awaitChange(seen, kPollMs);
      continue;
    }
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, kPollMs);
  }
}

}  // namespace icn::tcp
