// Parallel copy engine for peers on the same host. One NCCL proxy thread cannot copy faster than one
// core; here a message is split into chunks that a small thread pool copies concurrently, from our own
// address space (memcpy) or from the peer process (process_vm_readv, Linux CMA).
//
// No allocation per message: jobs go into a fixed ring; completion is an atomic countdown owned by the
// caller (one per receive). Idle threads spin briefly, then sleep.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"

namespace icn {

struct CopyCompletion {
  std::atomic<int> pending{0};    // chunks not yet copied
  std::atomic<int> errnoValue{0};  // first failure (0 = none)
  bool done() const { return pending.load(std::memory_order_acquire) == 0; }
};

class CopyEngine {
 public:
  // The process-wide engine (ICN_COPY_THREADS threads, started on first use). nullptr when disabled.
  static CopyEngine* instance();
  explicit CopyEngine(int threads, size_t chunkBytes);
  ~CopyEngine();

  // Copies size bytes from src (in process pid; our own pid = memcpy) to dst. Sets c->pending first.
  Status submit(pid_t pid, void* dst, const void* src, size_t size, CopyCompletion* c);
  // Copies one 8-byte word into another process (or ours): the "done" flag of a fast-path send.
  static bool writeWord(pid_t pid, uint64_t* remote, uint64_t value);
  // Reads one word from another process: proves CMA works before we rely on it.
  static bool readWord(pid_t pid, const uint64_t* remote, uint64_t* value);
  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  struct Job {
    pid_t pid;
    char* dst;
    const char* src;
    size_t len;
    CopyCompletion* c;
  };
  void run();
  bool pop(Job* j);

  size_t chunk_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> ring_;
  size_t head_ = 0, tail_ = 0;  // tail_ - head_ jobs queued
  std::atomic<size_t> queued_{0};
  bool stop_ = false;
};

}  // namespace icn
