// Lanes of a TCP connection: the data sockets. Lane 0 is driven by NCCL's proxy thread inside isend/irecv/test;
// every other lane has a helper thread that sleeps in poll() or on a condition variable while it has nothing to
// do. Each helper owns its socket; the comm owns the helpers (stopped and joined at close, which shuts the
// sockets down so that no helper waits on an idle peer).
#pragma once
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/socket.h"
#include "core/status.h"
#include "core/transport.h"
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
};

// Writes what the socket takes without blocking. *done when the whole piece went out.
Status writeSome(int fd, SendJob& job, bool* done, std::string* why);

// A send lane with its own thread. The queue holds one piece per message in flight at most, so it never fills
// (NCCL has at most kMaxRequests x kMaxRecvs sends in flight per comm).
class SendHelper {
 public:
  static constexpr size_t kCapacity = kMaxRequests * kMaxRecvs;
  SendHelper(Fd fd, FailureState& failure, int index);
  ~SendHelper();
  SendHelper(const SendHelper&) = delete;
  SendHelper& operator=(const SendHelper&) = delete;
  void push(const ChunkHeader& h, const uint8_t* data, std::atomic<int>* pending);

 private:
  void run();
  Fd fd_;
  FailureState& failure_;
  int index_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::array<SendJob, kCapacity> ring_;
  size_t head_ = 0, tail_ = 0;  // under mu_
  bool stop_ = false;           // under mu_
  std::atomic<bool> stopping_{false};
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
};

// Implemented by the receive comm: validates a header against what was posted (and claims the bytes), then
// learns that the payload arrived (or that the lane gave up on it).
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual Status land(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) = 0;
  virtual void landed(const Landing& l, bool arrived) = 0;
  // A lane holding an eager message sleeps here until the receive side changes (a receive posted, an earlier
  // eager message placed) or wake() is called, at most ms milliseconds.
  virtual void awaitChange(uint64_t seen, int ms) = 0;
  virtual uint64_t changes() const = 0;
  virtual void wake() = 0;
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

// A receive lane with its own thread.
class RecvHelper {
 public:
  RecvHelper(Fd fd, ChunkSink& sink, FailureState& failure, std::atomic<int>& closedLanes, int index);
  ~RecvHelper();
  RecvHelper(const RecvHelper&) = delete;
  RecvHelper& operator=(const RecvHelper&) = delete;

 private:
  void run();
  Fd fd_;
  ChunkSink& sink_;
  FailureState& failure_;
  std::atomic<int>& closedLanes_;
  int index_;
  std::atomic<bool> stopping_{false};
  ChunkReader reader_{4096, false};
  std::thread thread_;
};

// Socket options of a data lane: buffer sizes (ICN_TCP_SOCKBUF_BYTES).
void tuneLane(int fd);

}  // namespace icn::tcp
