// Recovery of connections the application does not call. A connection's recovery (a lane or lane 0's copy offered
// again, the peer's join, the handshake's messages) moves in its own progress, which runs when the application
// calls it; NCCL calls the connections of an occasional small collective only now and then, and a peer abandons a
// join not through within seconds. So every call into a TCP connection may also progress, at most every
// kTendEveryNs per process, the connections of the same thread that have recovery pending and were not called for
// kTendQuietNs. Only the calling thread's connections: NCCL drives one GPU's connections from one thread, and a
// connection is never progressed by two threads at once.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "core/coarse_clock.h"

namespace icn::tcp {

inline constexpr int64_t kTendEveryNs = 10'000'000;
inline constexpr int64_t kTendQuietNs = 20'000'000;

class Tended {
 public:
  virtual ~Tended() = default;
  // Whether a lane or lane 0's copy is away or being joined again.
  virtual bool recoveryPending() const = 0;
  // The connection's own progress (errors stay in the connection, for its next call to report).
  virtual void tend() = 0;

  // At the start of every call into the connection: notes the caller, then tends the caller's other connections.
  // The calls come from test() in a loop: the coarse clock (milliseconds are plenty for bounds of 10-20 ms).
  void called() {
    called(std::chrono::duration_cast<std::chrono::nanoseconds>(coarseNow().time_since_epoch()).count());
  }
  void called(int64_t nowNs);

 private:
  friend class Tending;
  std::atomic<std::thread::id> caller_{};
  int64_t lastCallNs_ = 0;  // written and read by caller_ only
};

// The process's connections (enrolled at creation, removed first thing in their destructor).
class Tending {
 public:
  static void enroll(Tended* t);
  static void leave(Tended* t);
  // Tends this thread's connections other than `self` that need it (see above).
  static void tendOthers(const Tended* self, int64_t nowNs);
};

}  // namespace icn::tcp
