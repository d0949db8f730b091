// Lanes of a TCP connection: the data sockets. Lane 0 is driven by NCCL's proxy thread inside isend/irecv/test;
// every other lane has a helper thread that sleeps in poll() or on a condition variable while it has nothing to
// do. Each helper owns its socket. The comm owns its helpers until close, which stops them (see Helper) and
// hands them to the reaper: their threads end on their own, and are joined later (at a later close or at
// finalize), so that a close does not wait for threads to be scheduled on a loaded machine.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/socket.h"
#include "core/status.h"
#include "core/transport.h"
#include "transport/tcp/tcp_info.h"
#include "transport/tcp/tcp_lane0.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {

// The first failure of a connection, shared by the proxy thread and the helpers; logged once, naming the peer.
class FailureState {
 public:
  explicit FailureState(std::string peer) : peer_(std::move(peer)) {}
  void fail(Status s, const std::string& why);
  Status status() const { return static_cast<Status>(status_.load(std::memory_order_acquire)); }
  const std::string& peer() const { return peer_; }

 private:
  std::string peer_;
  std::atomic<int> status_{0};
  std::mutex mu_;
};

// One piece of a message: its header, its payload, and the counter that falls to 0 when every piece of the
// message is in the kernel's hands.
struct SendJob {
  ChunkHeader header;
  const uint8_t* data = nullptr;
  std::atomic<int>* pending = nullptr;
  size_t sent = 0;  // header + payload bytes written so far
  // 0: a piece matched to a clear-to-send record, which the receiver must be reading. Otherwise an eager message,
  // which may wait in the receiver's socket until its receive is posted: on a helper lane its number among the
  // eager messages pushed on that lane (from 1), on lane 0 any non-zero value until its record is read.
  uint64_t early = 0;
  // Where the lane notes the end of the piece in its stream once written (failover: the piece is delivered once
  // the peer's TCP acknowledged that far); null when nobody asks.
  uint64_t* streamEnd = nullptr;
};

int64_t steadyNowNs();

// Writes what the socket takes without blocking. *done when the whole piece went out.
Status writeSome(int fd, SendJob& job, bool* done, std::string* why);

// How long a lane with bytes to write has written nothing that its peer must be reading. A peer that stops
// reading fails once that reaches ICN_PEER_TIMEOUT_MS; a byte written, or a head that the peer may leave unread
// (an eager message whose receive is not posted), starts the clock again.
class ReadWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // One more look at the lane: true once it has waited `limit` on a peer that must be reading.
  bool stalled(Clock::time_point now, bool mustRead, bool progressed, std::chrono::milliseconds limit) {
    if (!mustRead || progressed || since_ == Clock::time_point{}) {
      since_ = now;
      return false;
    }
    return now - since_ >= limit;
  }
  void reset() { since_ = {}; }  // nothing left to write
  // How long to sleep before the next look: at most `pollMs`, and not past the deadline.
  int pollMs(Clock::time_point now, int pollMs, std::chrono::milliseconds limit) const;
  // The end of a WARN: "nothing of <what> went out for N ms (ICN_PEER_TIMEOUT_MS)".
  static std::string what(std::chrono::milliseconds limit, const std::string& what);

 private:
  Clock::time_point since_{};
};

// What every helper shares: how it stops. A helper touches its comm or NCCL's memory only between enter()
// and leave() (a few non-blocking system calls, never a wait); stop() waits only while the helper is between
// them, so once it returns the helper never touches either again, and the comm may go while the thread ends.
class Helper {
 public:
  virtual ~Helper() = default;  // the derived class joins its thread
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;
  void stop();
  bool exited() const { return exited_.load(std::memory_order_acquire); }
  // Time the helper spent waiting with work in hand (a send lane for socket space, a receive lane holding an
  // eager message for its receive), and how often: the close lines report it.
  struct Waits {
    uint64_t count = 0, us = 0;
  };
  Waits waits() const { return {waitCount_.load(std::memory_order_relaxed), waitUs_.load(std::memory_order_relaxed)}; }

 protected:
  Helper(Fd fd, int index) : fd_(std::move(fd)), index_(index) {}
  bool enter();  // false once stopping: the thread must end without touching the comm
  void leave() { busy_.store(false, std::memory_order_seq_cst); }
  virtual void wakeForStop() = 0;  // wakes the thread from its idle wait
  void noteWait(std::chrono::steady_clock::time_point since) {
    waitCount_.fetch_add(1, std::memory_order_relaxed);
    waitUs_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - since).count()),
                      std::memory_order_relaxed);
  }
  Fd fd_;
  int index_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> busy_{false};
  std::atomic<bool> exited_{false};
  std::atomic<uint64_t> waitCount_{0}, waitUs_{0};
};

// The waits of a comm's helpers, summed.
template <class H>
Helper::Waits helperWaits(const std::vector<std::unique_ptr<H>>& helpers) {
  Helper::Waits sum;
  for (auto& h : helpers) {
    const Helper::Waits w = h->waits();
    sum.count += w.count;
    sum.us += w.us;
  }
  return sum;
}

// Helpers of closed comms, until their threads have ended; one per process.
class Reaper {
 public:
  ~Reaper() { drain(); }
  // Takes stopped helpers; destroys those adopted earlier whose threads have ended (closing their sockets).
  void adopt(std::vector<std::unique_ptr<Helper>> stopped);
  // Destroys every adopted helper (each thread ends soon after its stop()).
  void drain();

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Helper>> helpers_;
};
Reaper& reaper();

// A send lane with its own thread. The queue holds one piece per message in flight at most, so it never fills
// (NCCL has at most kMaxRequests x kMaxRecvs sends in flight per comm). Nothing unresolved is queued ahead of a
// matched piece (tcp_wire.h), so a lane whose piece the receiver must be reading and that writes nothing of it
// for peerTimeout fails the connection: the peer stopped reading.
class SendHelper final : public Helper {
 public:
  static constexpr size_t kCapacity = kMaxRequests * kMaxRecvs;
  // With failover, a lane whose socket fails stops and reports it (failed()) instead of failing the connection; the
  // comm gives up a lane that stalls (giveUp()) and measures the lane's rate (noteBusy()).
  SendHelper(Fd fd, FailureState& failure, int index, std::chrono::milliseconds peerTimeout, bool failover = false);
  ~SendHelper() override;
  void push(const ChunkHeader& h, const uint8_t* data, std::atomic<int>* pending, uint64_t* streamEnd = nullptr);
  // Failover: whether the lane gave up, and why (valid once failed()).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The comm gives the lane up (its peer's TCP stopped acknowledging while other lanes' did). Before failed().
  void giveUp(const std::string& why) {
    bool expected = false;
    if (!giving_.compare_exchange_strong(expected, true)) return;
    failReason_ = why;
    failed_.store(true, std::memory_order_release);
  }
  // Bytes of the lane's stream written so far.
  uint64_t written() const { return written_.load(std::memory_order_acquire); }
  // The kernel's count of the lane socket's acknowledged bytes and busy time (tcpBusy); false when unknown.
  bool busy(TcpBusy* out) const { return tcpBusy(fd_.get(), out); }
  // Bytes of the lane's stream handed to it so far (headers included): less delivered(), what it still has to move.
  uint64_t pushed() const { return pushed_.load(std::memory_order_relaxed); }
  const std::string& failReason() const { return failReason_; }
  // Bytes of the lane's stream its peer's TCP has acknowledged (written minus what the socket still holds).
  uint64_t delivered() const;
  // After stop(): hands every piece not yet written whole to f (it never will be) and empties the queue.
  template <class F>
  void takeUnwritten(F&& f) {
    std::lock_guard lk(mu_);
    for (; head_ != tail_; head_++) f(ring_[head_ % kCapacity]);
  }
  // Bytes per second the lane moves, from pieces that had to wait for socket space (a piece the socket buffer
  // took at once says nothing of the link), smoothed; 0 while unmeasured. A piece in hand that has been moving
  // slower than that for a while lowers it at once, so a lane whose link stalls stops getting work before its
  // piece ends. With failover: the comm's measure instead (noteBusy()), raised while a lane goes unmeasured.
  double rate(std::chrono::steady_clock::time_point now) const;
  // The smoothed rate as last measured, without the in-hand piece's or the probe's adjustment (0: unmeasured).
  double measuredRate() const { return static_cast<double>(rateBps_.load(std::memory_order_relaxed)); }
  uint64_t bytesSent() const { return bytesSent_.load(std::memory_order_relaxed); }
  // Failover (the comm's thread, the only one measuring then): `bytes` of the lane's stream were acknowledged over
  // `ns` of the kernel's busy time for its socket (busy()): the link's pace while it had work, without the idle
  // time between messages or the time until NCCL polled (which would make a lane that moves a message now and then
  // read as a slow link). Each 100 ms of busy time is one sample; one under half or over twice the rate replaces
  // it at once (a link that slowed down, or one probed), others are smoothed in. A lane without a sample for 2 s
  // counts twice as fast per 2 s since (up to 16 times), so a lane measured low gets work again and a new measure.
  // Bytes with no busy time (ns 0) count too: the kernel keeps busy time in jiffies, so a send shorter than one
  // adds a jiffy or nothing, and leaving out the bytes of the nothing would read a lane of short sends as slow.
  void noteBusy(uint64_t bytes, int64_t ns);
  // Rate samples taken so far (a new one: measuredRate() changed meaning).
  uint32_t samples() const { return samples_.load(std::memory_order_relaxed); }
  // The receiver posted the receive of this lane's oldest unresolved eager message (their records arrive in the
  // order the lane carries them): it must read the lane on.
  void earlyResolved() { earlyResolved_.fetch_add(1, std::memory_order_release); }

 private:
  void run();
  void wakeForStop() override;
  // Measures a piece: started, progressed (after each write), finished (blocked: it waited for socket space).
  void pieceStarted(std::chrono::steady_clock::time_point now);
  void pieceFinished(std::chrono::steady_clock::time_point now, size_t bytes, bool blocked);
  // One thread only: the helper's, or the comm's with failover. jumps: a sample under half or over twice the rate
  // replaces it.
  void addSpan(double bytes, int64_t ns, bool jumps = false);
  // Whether the receiver must be reading `job` now.
  bool mustRead(const SendJob& job) const {
    return job.early == 0 || job.early <= earlyResolved_.load(std::memory_order_acquire);
  }
  FailureState& failure_;
  const std::chrono::milliseconds peerTimeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::array<SendJob, kCapacity> ring_;
  size_t head_ = 0, tail_ = 0;  // under mu_
  uint64_t earlyPushed_ = 0;    // under mu_
  std::atomic<uint64_t> earlyResolved_{0};
  bool stop_ = false;           // under mu_
  std::atomic<uint64_t> rateBps_{0};     // smoothed rate, bytes/s (0: unmeasured)
  std::atomic<int64_t> sampledNs_{0};    // steady-clock ns of its last sample (0: none)
  std::atomic<uint32_t> samples_{0};
  std::atomic<int64_t> headStartNs_{0};  // steady-clock ns when the piece in hand started (0: none)
  std::atomic<uint64_t> headSent_{0};    // its bytes written so far
  std::atomic<uint64_t> bytesSent_{0};   // payload bytes of finished pieces
  std::atomic<uint64_t> written_{0};     // bytes of the lane's stream written, headers included
  std::atomic<uint64_t> pushed_{0};      // bytes of the lane's stream queued, headers included (the comm's thread)
  const bool failover_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> giving_{false};      // the first of the thread and the comm to give up writes the reason
  std::string failReason_;               // written before failed_ is set
  uint64_t ackedAtStart_ = 0;            // the socket's acknowledged bytes when the piece started (helper only)
  bool ackKnown_ = false;
  double spanBytes_ = 0;                 // the rate sample being gathered: bytes acknowledged, busy ns
  int64_t spanNs_ = 0;
  std::thread thread_;  // last: starts after everything above exists
};

// Where a validated piece lands in the receiver's posted buffer.
struct Landing {
  uint8_t* dest = nullptr;
  int slot = 0;
  int index = 0;
  uint32_t length = 0;
  // An eager message on a helper lane whose receive is not posted yet: the lane holds it (header read, payload
  // left in the socket) and asks again, with held still set, after the sink's next post.
  bool held = false;
  uint32_t offset = 0;   // the piece's place in its message
  bool eager = false;    // an eager message (its claim is the whole message)
  bool discard = false;  // read the payload and drop it (a resent piece the receiver already has; a lane-down)
};

// Implemented by the receive comm: validates a header against what was posted (and claims the bytes), then
// learns that the payload arrived (or that the lane gave up on it). A land() that fails hands out no landing.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual Status land(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) = 0;
  virtual void landed(const Landing& l, bool arrived) = 0;
};

// Reads header, payload, header, ... into the posted buffers. Headers are read through a staging buffer, so a
// small message arrives with its header in one system call; payload beyond what was staged is read straight
// into the posted buffer.
class ChunkReader {
 public:
  ChunkReader(size_t stageBytes, bool lane0) : stage_(new uint8_t[stageBytes]), cap_(stageBytes), lane0_(lane0) {}
  // Reads what the socket has without blocking. *eof when the peer closed between two pieces; *held when it
  // stopped at an eager message whose receive is not posted yet (call again after the sink changes).
  Status pump(int fd, ChunkSink& sink, bool* eof, bool* held, std::string* why);
  Status pump(ByteSource& src, ChunkSink& sink, bool* eof, bool* held, std::string* why);
  // Releases a piece cut short (the lane failed or closes).
  void abandon(ChunkSink& sink);

 private:
  std::unique_ptr<uint8_t[]> stage_;
  size_t cap_, pos_ = 0, len_ = 0;  // staged bytes are [pos_, len_)
  bool lane0_;
  alignas(8) uint8_t header_[sizeof(ChunkHeader)];
  size_t headerGot_ = 0;
  bool inPayload_ = false;
  bool holding_ = false;  // header_ is a held eager message
  Landing landing_;
  size_t got_ = 0;
};

// A receive lane with its own thread. While it holds an eager message (Landing::held) it sleeps until poked.
class RecvHelper final : public Helper {
 public:
  // failover: a lane that breaks (socket error, end of stream) stops without failing the connection; the sender
  // gives it up and resends what it lacks.
  RecvHelper(Fd fd, ChunkSink& sink, FailureState& failure, std::atomic<int>& closedLanes, int index,
             bool failover = false);
  ~RecvHelper() override;
  // The receive side changed (a receive posted, an eager message placed): a held message may go on.
  void poke();
  // The sender gave the lane up: read what its socket holds, drop a piece cut short, stop (retired()).
  void retire();
  bool retired() const { return retired_.load(std::memory_order_acquire); }

 private:
  void run();
  void wakeForStop() override;
  ChunkSink& sink_;
  FailureState& failure_;
  std::atomic<int>& closedLanes_;
  ChunkReader reader_{4096, false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> pokes_{0};
  std::atomic<bool> holding_{false};
  const bool failover_;
  std::atomic<bool> retiring_{false}, retired_{false};
  Fd wake_;  // an eventfd: retire() wakes the thread from poll()
  std::thread thread_;
};

// Socket options of a data lane: buffer sizes (ICN_TCP_SOCKBUF_BYTES).
void tuneLane(int fd);

}  // namespace icn::tcp
