// Closes UCX endpoints without making close wait for the peer. Delivering what was sent before a close
// needs worker progress, and NCCL closes comms one after another on both ranks: flushing in line would
// make each close wait behind the peer's. Comms hand their worker and endpoint here instead, so close
// returns at once; each endpoint is flushed (everything sent has left this process), then force-closed.
// Pending closes advance whenever the transport is called (closes, connects, accepts, tests) and at
// finalize, which waits for them (bounded): all on the caller's thread, as UCX workers prefer.
#pragma once
#include "transport/ucx/ucx_lib.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/ucx/ucx_endpoint.h"
#include "transport/ucx/ucx_worker.h"

namespace icn::ucx {

class Reaper {
 public:
  // A flush still running after this long is abandoned (the peer is gone or stalled).
  static constexpr auto kCloseDeadline = std::chrono::milliseconds(2000);

  Reaper() = default;
  ~Reaper();  // finishes (bounded) or abandons every pending close, then destroys the workers
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Takes both; the worker must have no other user. Never blocks on the network.
  void adopt(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep);
  // One non-blocking pass over pending closes; a no-op when there are none or another thread is at it.
  void poll() {
    if (pending_.load(std::memory_order_relaxed) != 0) pass(false);
  }
  // Waits until every close adopted so far has finished or been abandoned (at most kCloseDeadline).
  void drain();
  size_t pending() const { return pending_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::unique_ptr<Worker> worker;
    std::unique_ptr<Endpoint> ep;
    ucs_status_ptr_t flush = nullptr;
    ucs_status_ptr_t close = nullptr;
    std::chrono::steady_clock::time_point deadline;
  };
  void pass(bool wait);
  // Progresses one entry; true once it is closed (flush done or abandoned at the deadline).
  static bool advance(Entry& e, std::chrono::steady_clock::time_point now);

  std::mutex mu_;
  std::vector<Entry> entries_;
  std::atomic<size_t> pending_{0};
};

}  // namespace icn::ucx
