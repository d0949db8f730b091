#include "perf_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <sched.h>

namespace icn::perf {

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::milliseconds(60000);

bool Session::connect(std::string* err) {
  char mine[NCCL_NET_HANDLE_MAXSIZE] = {}, theirs[NCCL_NET_HANDLE_MAXSIZE];
  if (p_.net->listen(p_.ctx, 0, mine, &listen_) != ncclSuccess) return *err = "listen failed", false;
  if (!peer_.send(mine, sizeof mine) || !peer_.recv(theirs, sizeof theirs)) return *err = "handle exchange failed", false;
  ncclNetDeviceHandle_v11_t* dh = nullptr;
  auto deadline = Clock::now() + kWait;
  while (!send_ || !recv_) {  // both directions at once, as NCCL's proxy does
    if (!send_ && p_.net->connect(p_.ctx, 0, theirs, &send_, &dh) != ncclSuccess) return *err = "connect failed", false;
    if (!recv_ && p_.net->accept(listen_, &recv_, &dh) != ncclSuccess) return *err = "accept failed", false;
    if (Clock::now() > deadline) return *err = "connection timed out", false;
  }
  sbuf_.assign(o_.maxBytes, 0x5a);
  rbuf_.assign(o_.maxBytes, 0);
  if (p_.net->regMr(send_, sbuf_.data(), sbuf_.size(), NCCL_PTR_HOST, &smh_) != ncclSuccess ||
      p_.net->regMr(recv_, rbuf_.data(), rbuf_.size(), NCCL_PTR_HOST, &rmh_) != ncclSuccess)
    return *err = "regMr failed", false;
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
    if (o_.bw && !bandwidth(b, &pt.gbps, err)) return false;
    if (o_.lat && !latency(b, &pt, err)) return false;
    out->push_back(pt);
    if (b == 0) b = 1;
  }
  return true;
}

void Session::close() {
  peer_.barrier();
  if (send_) p_.net->deregMr(send_, smh_), p_.net->closeSend(send_);
  if (recv_) p_.net->deregMr(recv_, rmh_), p_.net->closeRecv(recv_);
  if (listen_) p_.net->closeListen(listen_);
}

}  // namespace icn::perf
