#include "transport/tcp/tcp_lane.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <sys/uio.h>
#include <linux/sockios.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>

#include "core/log.h"
#include "core/params.h"
#include "transport/tcp/tcp_info.h"

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

int ReadWatch::pollMs(Clock::time_point now, int pollMs, std::chrono::milliseconds limit) const {
  if (since_ == Clock::time_point{}) return pollMs;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(since_ + limit - now).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 1, pollMs));
}

std::string ReadWatch::what(std::chrono::milliseconds limit, const std::string& what) {
  return "nothing of " + what + " went out for " + std::to_string(limit.count()) + " ms (ICN_PEER_TIMEOUT_MS)";
}

bool Helper::enter() {
  busy_.store(true, std::memory_order_seq_cst);
  if (!stopping_.load(std::memory_order_seq_cst)) return true;
  busy_.store(false, std::memory_order_seq_cst);
  return false;
}

void Helper::stop() {
  // With enter(): either the helper sees the flag, or we see it busy and wait for the few system calls it makes
  // before leave(); both are sequentially consistent, so no step can slip between.
  stopping_.store(true, std::memory_order_seq_cst);
  while (busy_.load(std::memory_order_seq_cst)) std::this_thread::yield();
  ::shutdown(fd_.get(), SHUT_RDWR);  // wakes a poll(); the peer sees the lane end now, not at the join
  wakeForStop();
}

void Reaper::adopt(std::vector<std::unique_ptr<Helper>> stopped) {
  std::vector<std::unique_ptr<Helper>> ended;
  {
    std::lock_guard lk(mu_);
    for (size_t i = 0; i < helpers_.size();) {
      if (helpers_[i]->exited()) {
        ended.push_back(std::move(helpers_[i]));
        helpers_[i] = std::move(helpers_.back());
        helpers_.pop_back();
      } else {
        i++;
      }
    }
    for (auto& h : stopped) helpers_.push_back(std::move(h));
  }
  // `ended` goes here, outside the lock: joins that return at once, and their sockets close.
}

void Reaper::drain() {
  std::vector<std::unique_ptr<Helper>> all;
  {
    std::lock_guard lk(mu_);
    all.swap(helpers_);
  }
}

Reaper& reaper() {
  static Reaper r;
  return r;
}

SendHelper::SendHelper(Fd fd, FailureState& failure, int index, std::chrono::milliseconds peerTimeout, bool failover)
    : Helper(std::move(fd), index),
      failure_(failure),
      peerTimeout_(peerTimeout),
      failover_(failover),
      thread_([this] { run(); }) {}

uint64_t SendHelper::delivered() const {
  const uint64_t written = written_.load(std::memory_order_acquire);
  int queued = 0;
  if (ioctl(fd_.get(), SIOCOUTQ, &queued) != 0 || queued < 0) return 0;  // unknown: nothing counts as delivered
  return written >= static_cast<uint64_t>(queued) ? written - static_cast<uint64_t>(queued) : 0;
}

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

SendHelper::~SendHelper() {
  stop();  // a no-op wait when the comm stopped it already
  thread_.join();
}

void SendHelper::wakeForStop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
}

void SendHelper::push(const ChunkHeader& h, const uint8_t* data, std::atomic<int>* pending, uint64_t* streamEnd) {
  bool wake;
  {
    std::lock_guard lk(mu_);
    SendJob& j = ring_[tail_ % kCapacity];
    j.header = h;
    j.data = data;
    j.pending = pending;
    j.streamEnd = streamEnd;
    j.sent = 0;
    j.early = (h.flags & kChunkEager) ? ++earlyPushed_ : 0;
    pushed_.fetch_add(sizeof(ChunkHeader) + h.length, std::memory_order_relaxed);
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
      if (stop_) break;
      job = &ring_[head_ % kCapacity];  // stays put: push() only writes past tail_
    }
    bool done = false;
    bool blocked = false;
    ReadWatch watch;
    pieceStarted(std::chrono::steady_clock::now());

    for (;;) {
      if (!enter()) break;  // reads NCCL's buffer and updates the comm's request: only until stop()
      std::string why;
      const size_t before = job->sent;
      if (writeSome(fd_.get(), *job, &done, &why) != Status::Ok) {
        if (failover_) giveUp(why);  // the comm moves this lane's pieces elsewhere
        else failure_.fail(Status::RemoteError, "lane " + std::to_string(index_) + ": " + why);
        leave();
        break;
      }
      written_.fetch_add(job->sent - before, std::memory_order_release);
      headSent_.store(job->sent, std::memory_order_relaxed);
      if (done) {
        const size_t bytes = job->header.length;
        if (job->streamEnd) *job->streamEnd = written_.load(std::memory_order_relaxed);
        job->pending->fetch_sub(1, std::memory_order_release);
        leave();
        pieceFinished(std::chrono::steady_clock::now(), bytes, blocked);
        break;
      }
      blocked = true;
      const auto now = std::chrono::steady_clock::now();
      if (watch.stalled(now, mustRead(*job), job->sent != before, peerTimeout_)) {
        failure_.fail(Status::RemoteError, "the peer stopped reading lane " + std::to_string(index_) + ": " +
                                               ReadWatch::what(peerTimeout_, "a message whose receive it posted"));
        leave();
        break;
      }
      leave();
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, watch.pollMs(now, kPollMs, peerTimeout_));
      noteWait(now);
    }
    if (!done) break;
    std::lock_guard lk(mu_);
    head_++;
  }
  exited_.store(true, std::memory_order_release);
}

namespace {
int64_t steadyNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
// A rate sample spans at least this much busy time (pieces added up): acknowledgements come in bursts, so a short
// span says little, and a mean of short spans' rates leans to the bursts.
constexpr int64_t kRateSpanNs = 100'000'000;
// Failover: a lane measured this long ago counts twice as fast for each such time since (kMaxProbeDoublings at most):
// a lane whose rate came out low gets too little work to be measured again, so it is offered more until a
// measure says what it moves now.
constexpr int64_t kProbeAfterNs = 2'000'000'000;
constexpr int kMaxProbeDoublings = 4;
// A piece in hand lowers the lane's rate once it has been going this long (shorter is noise).
constexpr int64_t kStallSampleNs = 20'000'000;
}  // namespace

void SendHelper::pieceStarted(std::chrono::steady_clock::time_point now) {
  headSent_.store(0, std::memory_order_relaxed);
  ackedAtStart_ = 0;
  ackKnown_ = bytesAcked(fd_.get(), &ackedAtStart_);
  headStartNs_.store(std::max<int64_t>(1, steadyNs(now)), std::memory_order_relaxed);
}

void SendHelper::pieceFinished(std::chrono::steady_clock::time_point now, size_t bytes, bool blocked) {
  const int64_t start = headStartNs_.exchange(0, std::memory_order_relaxed);
  bytesSent_.fetch_add(bytes, std::memory_order_relaxed);
  const int64_t ns = steadyNs(now) - start;
  if (failover_) return;            // the comm measures the lane instead (noteBusy)
  if (!blocked || ns <= 0) return;  // the socket buffer took it all: the link may have idled meanwhile
  // The socket was full by the piece's end, so the link was busy: what the peer acknowledged meanwhile is its rate
  // (the bytes written would count the socket buffer's growth too).
  uint64_t acked = 0;
  double moved = static_cast<double>(bytes);
  if (ackKnown_ && bytesAcked(fd_.get(), &acked) && acked >= ackedAtStart_)
    moved = static_cast<double>(acked - ackedAtStart_);
  addSpan(moved, ns);
}

void SendHelper::noteBusy(uint64_t bytes, int64_t ns) {
  if (ns > 0 || bytes > 0) addSpan(static_cast<double>(bytes), std::max<int64_t>(ns, 0), true);
}

void SendHelper::addSpan(double bytes, int64_t ns, bool jumps) {
  spanBytes_ += bytes;
  spanNs_ += ns;
  if (spanNs_ < kRateSpanNs) return;
  const double sample = spanBytes_ * 1e9 / static_cast<double>(spanNs_);
  spanBytes_ = 0;
  spanNs_ = 0;
  const uint64_t old = rateBps_.load(std::memory_order_relaxed);
  // Weighted 1/4 to the new sample: a rail that changes speed is followed within a few samples. With failover a
  // sample at under half or over twice the rate replaces it: a link that slowed down, or one that was probed.
  const bool jumped = jumps && (sample < 0.5 * static_cast<double>(old) || sample > 2.0 * static_cast<double>(old));
  const double next = old == 0 || jumped ? sample : 0.75 * static_cast<double>(old) + 0.25 * sample;
  rateBps_.store(std::max<uint64_t>(1, static_cast<uint64_t>(next)), std::memory_order_relaxed);
  sampledNs_.store(steadyNs(std::chrono::steady_clock::now()), std::memory_order_relaxed);
  samples_.fetch_add(1, std::memory_order_relaxed);
}

double SendHelper::rate(std::chrono::steady_clock::time_point now) const {
  const double smoothed = static_cast<double>(rateBps_.load(std::memory_order_relaxed));
  if (failover_) {  // a slow delivery shows in the comm's own look; a lane not measured lately is probed
    const int64_t sampled = sampledNs_.load(std::memory_order_relaxed);
    if (smoothed == 0 || sampled == 0) return smoothed;
    const int64_t doublings = std::min<int64_t>((steadyNs(now) - sampled) / kProbeAfterNs, kMaxProbeDoublings);
    return doublings > 0 ? smoothed * static_cast<double>(int64_t{1} << doublings) : smoothed;
  }
  const int64_t start = headStartNs_.load(std::memory_order_relaxed);
  if (start == 0) return smoothed;
  const int64_t ns = steadyNs(now) - start;
  if (ns < kStallSampleNs) return smoothed;
  const double partial = std::max(1.0, static_cast<double>(headSent_.load(std::memory_order_relaxed)) * 1e9 /
                                           static_cast<double>(ns));
  return smoothed == 0 || partial < smoothed ? partial : smoothed;
}

Status ChunkReader::pump(int fd, ChunkSink& sink, bool* eof, bool* held, std::string* why) {
  SocketSource src(fd);
  return pump(src, sink, eof, held, why);
}

Status ChunkReader::pump(ByteSource& src, ChunkSink& sink, bool* eof, bool* held, std::string* why) {
  *eof = false;
  *held = false;
  bool drained = false;  // a read came back short: the source is (most likely) empty, stop before an EAGAIN
  // Reads into [buf, buf + n): Ok with *got > 0, or Ok with *got == 0 when nothing is there (or at EOF: *closed).
  auto read = [&](uint8_t* buf, size_t n, size_t* got, bool* closed) {
    *got = 0;
    *closed = false;
    if (drained) return Status::Ok;
    ICN_CHECK(src.read(buf, n, got, closed, why));
    drained = *got < n;
    return Status::Ok;
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
      if (!landing_.discard) memcpy(landing_.dest + got_, stage_.get() + pos_, take);
      pos_ += take;
      got_ += take;
    } else if (landing_.discard) {  // the stage is empty: read through it and drop
      ICN_CHECK(read(stage_.get(), std::min<size_t>(cap_, landing_.length - got_), &got, &closed));
      if (closed) {
        *why = "connection closed in the middle of a message";
        return Status::RemoteError;
      }
      if (got == 0) return Status::Ok;
      got_ += got;
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

RecvHelper::RecvHelper(Fd fd, ChunkSink& sink, FailureState& failure, std::atomic<int>& closedLanes, int index,
                       bool failover)
    : Helper(std::move(fd), index),
      sink_(sink),
      failure_(failure),
      closedLanes_(closedLanes),
      failover_(failover),
      wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      thread_([this] { run(); }) {}

void RecvHelper::retire() {
  retiring_.store(true, std::memory_order_seq_cst);
  const uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof one);
  poke();
}

RecvHelper::~RecvHelper() {
  stop();
  thread_.join();
}

void RecvHelper::wakeForStop() {
  std::lock_guard lk(mu_);
  cv_.notify_all();
  const uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof one);
}

void RecvHelper::poke() {
  // With run(): either we see it holding and notify under the lock, or it sees the count move before it sleeps.
  pokes_.fetch_add(1, std::memory_order_seq_cst);
  if (!holding_.load(std::memory_order_seq_cst)) return;
  std::lock_guard lk(mu_);
  cv_.notify_all();
}

void RecvHelper::run() {
  nameThread("r", index_);
  for (;;) {
    if (!enter()) break;  // writes into NCCL's buffers and the comm's state: only until stop()
    bool eof = false, held = false;
    std::string why;
    const uint64_t seen = pokes_.load(std::memory_order_seq_cst);  // a poke after this ends the wait below
    const bool retiring = retiring_.load(std::memory_order_seq_cst);  // then this pump reads what is left
    Status st = reader_.pump(fd_.get(), sink_, &eof, &held, &why);
    // Failover: a lane that breaks or is given up stops here; the sender resends what it lacks. A held eager
    // message cannot be resent: that fails the connection.
    if (((failover_ && (st != Status::Ok || eof)) || retiring) && !held) {
      reader_.abandon(sink_);
      if (st != Status::Ok && !retiring)
        ICN_INFO(subsys::Net, "TCP connection with %s: lane %d broke (%s); waiting for the sender to resend its "
                 "pieces", failure_.peer().c_str(), index_, why.c_str());
      closedLanes_.fetch_add(1);
      retired_.store(true, std::memory_order_release);
      leave();
      break;
    }
    if (st != Status::Ok || eof || (retiring && held)) {
      reader_.abandon(sink_);
      if (st != Status::Ok) failure_.fail(st, "lane " + std::to_string(index_) + ": " + why);
      else if (retiring) failure_.fail(Status::RemoteError, "lane " + std::to_string(index_) + " given up holding a message sent before its receive");
      if (eof) closedLanes_.fetch_add(1);
      leave();
      break;
    }
    leave();
    if (held) {
      holding_.store(true, std::memory_order_seq_cst);
      const auto since = std::chrono::steady_clock::now();
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(kPollMs),
                   [&] { return pokes_.load(std::memory_order_seq_cst) != seen || stopping_.load(); });
      holding_.store(false, std::memory_order_seq_cst);
      lk.unlock();
      noteWait(since);
      continue;
    }
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    ::poll(p, wake_.valid() ? 2 : 1, kPollMs);
    if (p[1].revents & POLLIN) {
      uint64_t n;
      (void)!::read(wake_.get(), &n, sizeof n);
    }
  }
  exited_.store(true, std::memory_order_release);
}

}  // namespace icn::tcp
