#include "perf_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <sched.h>
#include <sys/resource.h>

namespace icn::perf {

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::milliseconds(60000);

// CPU seconds this process has used (every thread: the plugin's helpers too), user and system.
double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

bool Session::connect(std::string* err) {
  const size_t n = static_cast<size_t>(o_.exchange ? o_.conns : 1);
  std::vector<char> mine(n * NCCL_NET_HANDLE_MAXSIZE, 0), theirs(n * NCCL_NET_HANDLE_MAXSIZE);
  listens_.assign(n, nullptr);
  sends_.assign(n, nullptr);
  recvs_.assign(n, nullptr);
  for (size_t c = 0; c < n; c++)
    if (p_.net->listen(p_.ctx, 0, &mine[c * NCCL_NET_HANDLE_MAXSIZE], &listens_[c]) != ncclSuccess)
      return *err = "listen failed", false;
  if (!peer_.send(mine.data(), mine.size()) || !peer_.recv(theirs.data(), theirs.size()))
    return *err = "handle exchange failed", false;
  ncclNetDeviceHandle_v11_t* dh = nullptr;
  auto deadline = Clock::now() + kWait;
  for (bool ready = false; !ready;) {  // both directions at once, as NCCL's proxy does
    ready = true;
    for (size_t c = 0; c < n; c++) {
      if (!sends_[c] && p_.net->connect(p_.ctx, 0, &theirs[c * NCCL_NET_HANDLE_MAXSIZE], &sends_[c], &dh) != ncclSuccess)
        return *err = "connect failed", false;
      if (!recvs_[c] && p_.net->accept(listens_[c], &recvs_[c], &dh) != ncclSuccess) return *err = "accept failed", false;
      ready = ready && sends_[c] && recvs_[c];
    }
    if (Clock::now() > deadline) return *err = "connection timed out", false;
  }
  listen_ = listens_[0];
  send_ = sends_[0];
  recv_ = recvs_[0];
  sbuf_.assign(o_.maxBytes, 0x5a);
  // Exchange mode receives every request in flight into its own slot (as NCCL's step buffers), within a bound.
  size_t rbytes = o_.maxBytes;
  if (o_.exchange) rbytes = std::max(rbytes, std::min<size_t>(size_t(o_.window) * n * o_.maxBytes, 256u << 20));
  rbuf_.assign(rbytes, 0);
  smhs_.assign(n, nullptr);
  rmhs_.assign(n, nullptr);
  for (size_t c = 0; c < n; c++)
    if (p_.net->regMr(sends_[c], sbuf_.data(), sbuf_.size(), NCCL_PTR_HOST, &smhs_[c]) != ncclSuccess ||
        p_.net->regMr(recvs_[c], rbuf_.data(), rbuf_.size(), NCCL_PTR_HOST, &rmhs_[c]) != ncclSuccess)
      return *err = "regMr failed", false;
  smh_ = smhs_[0];
  rmh_ = rmhs_[0];
  return true;
}

bool Session::send(void* buf, size_t n, void* mh, std::string* err) {
  void* req = nullptr;
  while (!req)
    if (p_.net->isend(send_, buf, n, 0, mh, nullptr, &req) != ncclSuccess) return *err = "isend failed", false;
  if (netapi::waitRequest(p_, req, nullptr, kWait) != ncclSuccess) return *err = "send did not complete", false;
  return true;
}

bool Session::recv(void* buf, size_t n, void* mh, std::string* err) {
  void* req = nullptr;
  int tag = 0;
  if (p_.net->irecv(recv_, 1, &buf, &n, &tag, &mh, nullptr, &req) != ncclSuccess) return *err = "irecv failed", false;
  if (netapi::waitRequest(p_, req, nullptr, kWait) != ncclSuccess) return *err = "receive did not complete", false;
  return true;
}

// Rank 0 streams `count` messages with `window` in flight; rank 1 keeps `window` receives posted, then
// acknowledges with a zero-byte message. Rank 0 times first send to ack.
bool Session::bandwidth(size_t bytes, double* gbps, std::string* err) {
  size_t count = std::clamp<size_t>(static_cast<size_t>(o_.bwBytes / std::max<size_t>(bytes, 1)), 64, 20000);
  const int window = o_.window;
  std::vector<void*> reqs(window, nullptr);
  if (!peer_.barrier()) return *err = "barrier failed", false;
  auto start = Clock::now();
  size_t posted = 0, completed = 0;
  auto deadline = Clock::now() + kWait;
  uint64_t passes = 0;
  while (completed < count) {
    const size_t before = posted + completed;
    for (int w = 0; w < window; w++) {
      if (reqs[w]) {
        int done = 0;
        if (p_.net->test(reqs[w], &done, nullptr) != ncclSuccess) return *err = "test failed", false;
        if (!done) continue;
        reqs[w] = nullptr;
        completed++;
      }
      if (posted < count) {
        if (rank_ == 0) {
          if (p_.net->isend(send_, sbuf_.data(), bytes, 0, smh_, nullptr, &reqs[w]) != ncclSuccess)
            return *err = "isend failed", false;
        } else {
          void* d = rbuf_.data();
          size_t n = bytes;
          int tag = 0;
          if (p_.net->irecv(recv_, 1, &d, &n, &tag, &rmh_, nullptr, &reqs[w]) != ncclSuccess)
            return *err = "irecv failed", false;
        }
        if (reqs[w]) posted++;
      }
    }
    // NCCL's proxy thread yields the CPU when a pass over its operations made no progress; do the same, so
    // the numbers are what NCCL would see. It matters where CPUs are scarce: with software RoCE (rxe) the
    // kernel's packet processing needs the cycles a tight polling loop would take.
    if (posted + completed == before) sched_yield();
    // The deadline every 1024 passes only: a precise clock read is a system call on some VMs (HPET).
    if ((++passes & 1023) == 0 && Clock::now() > deadline) return *err = "bandwidth run timed out", false;
  }
  if (rank_ == 1) return send(sbuf_.data(), 0, smh_, err);
  if (!recv(rbuf_.data(), 0, rmh_, err)) return false;
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  *gbps = static_cast<double>(bytes) * static_cast<double>(count) / secs / 1e9;
  return true;
}

// Both ranks send `count` messages to each other and receive as many, over every connection at once, with
// `window` requests in flight per connection and direction. Each pass does, per connection, what NCCL's proxy
// does per step: post one request when the window has room, test the oldest one. Both ranks time from a
// barrier to their last completion; rank 0 reports the slower of the two.
bool Session::exchange(size_t bytes, Point* pt, std::string* err) {
  const size_t n = sends_.size();
  const size_t window = static_cast<size_t>(o_.window);
  const size_t count = std::clamp<size_t>(static_cast<size_t>(o_.bwBytes / std::max<size_t>(bytes, 1) / n), 64, 20000);
  const size_t slots = std::max<size_t>(1, std::min(window * n, rbuf_.size() / std::max<size_t>(bytes, 1)));
  struct Ring {
    std::vector<void*> reqs;
    size_t posted = 0, completed = 0;
    size_t ready = 0;  // requests the (emulated) GPU has made ready to post
  };
  std::vector<Ring> tx(n), rx(n);
  for (size_t c = 0; c < n; c++) tx[c].reqs.assign(window, nullptr), rx[c].reqs.assign(window, nullptr);
  if (!peer_.barrier()) return *err = "barrier failed", false;
  const double cpu0 = cpuSeconds();
  auto start = Clock::now();
  auto deadline = start + kWait;
  size_t left = 2 * n * count;
  uint64_t passes = 0;
  // Without --slice-us the GPU is infinitely fast: every free step buffer is ready at once. With it, the two
  // ranks' GPUs take turns of that length (as two processes time-sharing one GPU): a rank fills send steps and
  // drains receive steps only in its own turns, so a step freed by the network waits for the next turn.
  const int64_t slice = o_.sliceUs;
  auto ourTurn = [&] {
    if (slice <= 0) return true;
    int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
    return (us / slice) % 2 == rank_;
  };
  while (left > 0) {
    bool moved = false;
    const bool turn = ourTurn();
    for (size_t c = 0; c < n; c++) {
      for (int dir = 0; dir < 2; dir++) {
        Ring& r = dir == 0 ? tx[c] : rx[c];
        if (turn) r.ready = std::min(count, r.completed + window);
        if (r.posted < r.ready) {
          void*& q = r.reqs[r.posted % window];
          if (dir == 0) {
            if (p_.net->isend(sends_[c], sbuf_.data(), bytes, 0, smhs_[c], nullptr, &q) != ncclSuccess)
              return *err = "isend failed", false;
          } else {
            void* d = rbuf_.data() + ((c * window + r.posted % window) % slots) * bytes;
            size_t sz = bytes;
            int tag = 0;
            if (p_.net->irecv(recvs_[c], 1, &d, &sz, &tag, &rmhs_[c], nullptr, &q) != ncclSuccess)
              return *err = "irecv failed", false;
          }
          if (q) r.posted++, moved = true;
        }
        if (r.completed < r.posted) {
          int done = 0;
          if (p_.net->test(r.reqs[r.completed % window], &done, nullptr) != ncclSuccess)
            return *err = "test failed", false;
          if (done) r.reqs[r.completed++ % window] = nullptr, left--, moved = true;
        }
      }
    }
    if (!moved) sched_yield();  // as NCCL's proxy after a pass without progress
    if ((++passes & 1023) == 0 && Clock::now() > deadline) return *err = "exchange timed out", false;
  }
  double mine[2] = {std::chrono::duration<double>(Clock::now() - start).count(), cpuSeconds() - cpu0};
  double theirs[2] = {};
  if (!peer_.send(mine, sizeof mine) || !peer_.recv(theirs, sizeof theirs)) return *err = "exchange failed", false;
  const double secs = std::max(mine[0], theirs[0]);
  pt->gbps = static_cast<double>(bytes) * static_cast<double>(count * n) / secs / 1e9;
  pt->msgUs = secs * 1e6 / static_cast<double>(count * n);
  pt->cpuUs = (mine[1] + theirs[1]) * 1e6 / static_cast<double>(count * n);
  return true;
}

bool Session::latency(size_t bytes, Point* pt, std::string* err) {
  int iters = bytes >= (1u << 20) ? std::max(20, o_.latIters / 20) : o_.latIters;
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  if (!peer_.barrier()) return *err = "barrier failed", false;
  for (int i = 0; i < iters + 10; i++) {  // 10 warm-up round trips
    auto t0 = Clock::now();
    if (rank_ == 0) {
      if (!send(sbuf_.data(), bytes, smh_, err) || !recv(rbuf_.data(), bytes, rmh_, err)) return false;
    } else {
      if (!recv(rbuf_.data(), bytes, rmh_, err) || !send(sbuf_.data(), bytes, smh_, err)) return false;
    }
    if (i >= 10) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
  }
  std::sort(us.begin(), us.end());
  pt->p50us = us[us.size() / 2];
  pt->p99us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  pt->minus = us.front();
  return true;
}

bool Session::run(std::vector<Point>* out, std::string* err) {
  for (size_t b = o_.minBytes; b <= o_.maxBytes; b *= 2) {
    Point pt{b};
    if (o_.exchange) {
      if (!exchange(b, &pt, err)) return false;
    } else if (o_.bw && !bandwidth(b, &pt.gbps, err)) {
      return false;
    }
    if (o_.lat && !latency(b, &pt, err)) return false;
    out->push_back(pt);
    if (b == 0) b = 1;
  }
  return true;
}

void Session::close() {
  peer_.barrier();
  for (size_t c = 0; c < smhs_.size(); c++)
    if (smhs_[c]) p_.net->deregMr(sends_[c], smhs_[c]);
  for (size_t c = 0; c < rmhs_.size(); c++)
    if (rmhs_[c]) p_.net->deregMr(recvs_[c], rmhs_[c]);
  for (void* c : sends_)
    if (c) p_.net->closeSend(c);
  for (void* c : recvs_)
    if (c) p_.net->closeRecv(c);
  for (void* l : listens_)
    if (l) p_.net->closeListen(l);
}

}  // namespace icn::perf
