#include "core/copy_engine.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "core/log.h"
#include "core/params.h"

namespace icn {
namespace {
constexpr size_t kRingJobs = 1 << 14;
constexpr int kSpinIterations = 20000;  // ~tens of microseconds before an idle worker sleeps

bool copyChunk(pid_t pid, char* dst, const char* src, size_t len) {
  if (pid == getpid()) {
    memcpy(dst, src, len);
    return true;
  }
  while (len) {
    iovec local{dst, len}, remote{const_cast<char*>(src), len};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return false;
    dst += n;
    src += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

CopyEngine* CopyEngine::instance() {
  static std::unique_ptr<CopyEngine> engine = []() -> std::unique_ptr<CopyEngine> {
    int threads = static_cast<int>(params::getInt(params::Id::CopyThreads));
    if (threads <= 0) return nullptr;
    size_t chunk = static_cast<size_t>(std::max<int64_t>(4096, params::getInt(params::Id::CopyChunkBytes)));
    ICN_INFO(subsys::Net | subsys::Init, "same-host fast path: %d copy threads, %zu-byte chunks (ICN_COPY_THREADS)",
             threads, chunk);
    return std::make_unique<CopyEngine>(std::min(threads, 64), chunk);
  }();
  return engine.get();
}

CopyEngine::CopyEngine(int threads, size_t chunkBytes) : chunk_(chunkBytes), ring_(kRingJobs) {
  for (int i = 0; i < threads; i++) workers_.emplace_back([this] { run(); });
}

CopyEngine::~CopyEngine() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Status CopyEngine::submit(pid_t pid, void* dst, const void* src, size_t size, CopyCompletion* c) {
  size_t pieces = size == 0 ? 0 : (size + chunk_ - 1) / chunk_;
  c->errnoValue.store(0, std::memory_order_relaxed);
  c->pending.store(static_cast<int>(pieces), std::memory_order_release);
  if (pieces == 0) return Status::Ok;
  {
    std::lock_guard lk(mu_);
    if (tail_ - head_ + pieces > ring_.size()) {
      c->pending.store(0, std::memory_order_release);
      ICN_WARN(subsys::Net, "copy engine queue full (%zu jobs)", ring_.size());
      return Status::InternalError;
    }
    for (size_t i = 0; i < pieces; i++) {
      size_t off = i * chunk_;
      ring_[tail_++ % ring_.size()] = Job{pid, static_cast<char*>(dst) + off, static_cast<const char*>(src) + off,
                                         std::min(chunk_, size - off), c};
    }
    queued_.fetch_add(pieces, std::memory_order_release);
  }
  if (pieces == 1)
    cv_.notify_one();
  else
    cv_.notify_all();
  return Status::Ok;
}

bool CopyEngine::pop(Job* j) {
  std::lock_guard lk(mu_);
  if (head_ == tail_) return false;
  *j = ring_[head_++ % ring_.size()];
  queued_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void CopyEngine::run() {
  for (;;) {
    Job j;
    int spins = 0;
    for (;;) {
      if (queued_.load(std::memory_order_acquire) > 0 && pop(&j)) break;
      if (++spins < kSpinIterations) {
        __builtin_ia32_pause();
        continue;
      }
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || head_ != tail_; });
      if (stop_ && head_ == tail_) return;
      spins = 0;
    }
    if (!copyChunk(j.pid, j.dst, j.src, j.len)) {
      int expected = 0;
      j.c->errnoValue.compare_exchange_strong(expected, errno ? errno : EIO);
    }
    j.c->pending.fetch_sub(1, std::memory_order_acq_rel);
  }
}

bool CopyEngine::writeWord(pid_t pid, uint64_t* remote, uint64_t value) {
  if (pid == getpid()) {
    __atomic_store_n(remote, value, __ATOMIC_RELEASE);
    return true;
  }
  iovec local{&value, sizeof value}, rem{remote, sizeof value};
  return process_vm_writev(pid, &local, 1, &rem, 1, 0) == static_cast<ssize_t>(sizeof value);
}

bool CopyEngine::readWord(pid_t pid, const uint64_t* remote, uint64_t* value) {
  if (pid == getpid()) {
    *value = __atomic_load_n(remote, __ATOMIC_ACQUIRE);
    return true;
  }
  iovec local{value, sizeof *value}, rem{const_cast<uint64_t*>(remote), sizeof *value};
  return process_vm_readv(pid, &local, 1, &rem, 1, 0) == static_cast<ssize_t>(sizeof *value);
}

}  // namespace icn
