// Closes UCX endpoints in the background. Delivering what was sent before a close needs worker
// progress, and NCCL closes comms one after another on both ranks: flushing in line would make each
// close wait behind the peer's. Comms hand their worker and endpoint here instead, so close returns at
// once; each endpoint is flushed (everything sent has left this process), then force-closed.
#pragma once
#include <ucp/api/ucp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/ucx/ucx_endpoint.h"
#include "transport/ucx/ucx_worker.h"

namespace icn::ucx {

class Reaper {
 public:
  // A flush still running after this long is abandoned (the peer is gone or stalled).
  static constexpr auto kCloseDeadline = std::chrono::milliseconds(2000);
  // Closes younger than this are polled without sleeping.
  static constexpr auto kEagerPoll = std::chrono::milliseconds(100);
  // At shutdown, pending closes get as long as any close would: until then they may still carry the
  // last bytes this process sent.
  static constexpr auto kShutdownGrace = kCloseDeadline;

  Reaper() = default;
  ~Reaper();  // finishes or cancels every pending close, then destroys the workers
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Takes both; the worker must have no other user. Never blocks on the network.
  void adopt(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep);
  // Waits until every close adopted so far has finished or been cancelled (at most kCloseDeadline):
  // what was sent before a close is delivered before the process moves on (net plugin finalize).
  void drain();
  size_t pending();

 private:
  struct Entry {
    std::unique_ptr<Worker> worker;
    std::unique_ptr<Endpoint> ep;
    ucs_status_ptr_t flush = nullptr;
    ucs_status_ptr_t close = nullptr;
    std::chrono::steady_clock::time_point deadline;
  };
  void run();
  // Progresses one entry; true once it is closed (flush done or abandoned at the deadline).
  static bool advance(Entry& e, std::chrono::steady_clock::time_point now);

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable drained_;
  std::vector<Entry> incoming_;
  size_t unfinished_ = 0;  // adopted and not yet closed
  bool stop_ = false;
  std::chrono::steady_clock::time_point stopDeadline_{};
  std::thread thread_;
};

}  // namespace icn::ucx
