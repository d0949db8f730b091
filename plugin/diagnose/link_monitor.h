// Lateness of one connection (one direction of one peer of one communicator rank), measured where the transport
// sees its requests. Transports call the hooks below from the thread that posts and tests the connection's requests
// (NCCL's proxy thread); a reporting thread reads the figures concurrently. The hooks take no lock, allocate nothing
// and cost a few relaxed atomic stores each.
//
// What is measured, per operation (an isend or an irecv, grouped receives counting as one):
//   wait     the time the operation stood at the head of the connection's queue waiting for the peer: from
//            max(posted, previous operation done) to the first byte (receive) or the peer's clear-to-send (send;
//            for a transport without one, the first byte the kernel took). An operation whose older sibling is
//            still pending waits for that sibling, not for the peer, and counts 0.
//   arrival  the wait of an operation posted on an idle connection (nothing else pending): how late the peer
//            came to the exchange (a rank that enters a collective late shows here).
//   rate     per operation of at least kRateMinBytes, its pace: (done - max(ready, posted)) per kPaceBytes, in a
//            histogram. A period's rate is kPaceBytes over its median pace: a figure of the bulk of its messages,
//            which a few stretched by a busy host's late poll do not move (where a sum of durations would follow
//            them), while a slow link slows nearly every one. The connection's history is the same median over
//            everything since it opened.
//   wire     where the transport can read its sockets' delivery (TCP): bytes the peer acknowledged over the time the
//            sockets had bytes in flight or a full send buffer, not counting the time the peer's window was full.
//            It is the link's pace alone: neither side's threads polling late, nor a receiver slow to read, is in
//            it. Where a period has enough of it, it is the period's rate (see summary.h).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "diagnose/histogram.h"

namespace icn::diagnose {

enum class Dir : uint8_t { Send, Recv };
const char* dirName(Dir d);

// Who is on both ends of a connection; fixed at connect/accept time.
struct LinkInfo {
  uint64_t commId = 0;
  int rank = -1;          // our rank in the communicator, -1 when unknown
  int peerRank = -1;      // the peer's rank, -1 when unknown
  std::string host;       // our host name
  std::string addr;       // our address on this connection (ip or ip:port)
  std::string peerHost;   // the peer's host name
  std::string peerAddr;   // the peer's address
  Dir dir = Dir::Send;    // Send: we send to the peer; Recv: we receive from it
};

// Monotonic nanoseconds (CLOCK_MONOTONIC through steady_clock), the time base of every hook.
inline uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Identifies one tracked operation; kNoOp when the operation is not tracked (every slot busy): hooks ignore it.
using OpId = uint32_t;
constexpr OpId kNoOp = 0;

// One pending operation as a reporting thread sees it.
struct PendingOp {
  int tag = 0;
  uint64_t bytes = 0;       // size posted
  uint64_t bytesDone = 0;   // bytes moved so far (as far as the transport reported progress)
  uint64_t postedNs = 0;
  uint64_t readyNs = 0;     // first byte / clear-to-send; 0 when not yet
  uint64_t progressNs = 0;  // last time a byte of it moved (0: none yet)
};

// Figures of one period, for one connection or several merged.
struct WindowFigures {
  uint32_t count = 0;            // operations that got their first byte / clear-to-send in the period
  double waitMedianS = 0, waitP90S = 0, waitMeanS = 0;
  uint32_t arrivals = 0;         // of those, operations posted on an idle connection
  double arrivalMedianS = 0, arrivalP90S = 0;
  double rateBps = 0;            // the period's rate (0: fewer than kRateMinMessages measured)
  double rateRatio = 0;          // the period's rate / the connection's rate since it opened (0: unknown)
  double rateBytes = 0;          // the mean size of the messages the rate was measured on
  bool rateWire = false;         // the rate is the wire measure (else the messages' median pace)
  double stallShare = 0;         // of the period, the share this process was not running when it should have
};

// The waits of one period, before figures are taken (histograms of several connections add up).
struct WindowCounts {
  WaitHistogram::Counts wait, arrival;
  WaitHistogram::Counts pace;          // per rated operation, its time per kPaceBytes (total: how many)
  uint64_t rateBytes = 0;              // the rated operations' bytes
  uint64_t wireBytes = 0, wireNs = 0;  // the wire measure: bytes acknowledged, busy time
  WindowCounts& operator+=(const WindowCounts& o) {
    wait += o.wait;
    arrival += o.arrival;
    pace += o.pace;
    rateBytes += o.rateBytes;
    wireBytes += o.wireBytes;
    wireNs += o.wireNs;
    return *this;
  }
};
WindowFigures figures(const WindowCounts& c);

class LinkMonitor {
 public:
  static constexpr int kSlots = 64;                  // tracked operations in flight (NCCL keeps <= 8 per connection)
  static constexpr uint64_t kRateMinBytes = 64 << 10;  // smaller messages measure latency, not rate
  static constexpr uint64_t kRateMinMessages = 8;      // a period's rate needs at least this many of them
  static constexpr uint64_t kPaceBytes = 64 << 10;     // the pace histogram times this many bytes

  explicit LinkMonitor(LinkInfo info);
  LinkMonitor(const LinkMonitor&) = delete;
  LinkMonitor& operator=(const LinkMonitor&) = delete;

  const LinkInfo& info() const { return info_; }

  // ---- hooks (the connection's own thread) ----
  OpId posted(int tag, uint64_t bytes, uint64_t tNs);
  // Receive: first byte arrived; send: the peer's clear-to-send (or the first byte the kernel took). A time
  // earlier than the post (a message or record that was already there) counts as no wait.
  void ready(OpId op, uint64_t tNs);
  // Optional: bytes moved so far, for hang reports (where the bytes stopped).
  void progress(OpId op, uint64_t bytesSoFar, uint64_t tNs);
  void done(OpId op, uint64_t bytes, uint64_t tNs);
  // The request failed or its connection closes: forget it without a sample.
  void abandon(OpId op);
  // The wire measure since the previous call: bytes the peer acknowledged and the time the connection's sockets
  // were busy (for several sockets working side by side, the longest one's).
  void onWire(uint64_t bytesAcked, uint64_t busyNs);

  // The same hooks under the names of each side's events.
  OpId onSendPosted(int tag, uint64_t bytes, uint64_t t) { return posted(tag, bytes, t); }
  void onClearToSend(OpId op, uint64_t t) { ready(op, t); }
  void onSendDone(OpId op, uint64_t bytes, uint64_t t) { done(op, bytes, t); }
  OpId onRecvPosted(int tag, uint64_t bytes, uint64_t t) { return posted(tag, bytes, t); }
  void onFirstByte(OpId op, uint64_t t) { ready(op, t); }
  void onRecvDone(OpId op, uint64_t bytes, uint64_t t) { done(op, bytes, t); }

  // ---- readers (any thread) ----
  uint64_t lastProgressNs() const { return lastProgressNs_.load(std::memory_order_relaxed); }
  uint64_t lastPostNs() const { return lastPostNs_.load(std::memory_order_relaxed); }
  uint32_t pending() const { return pending_.load(std::memory_order_relaxed); }
  uint64_t untracked() const { return untracked_.load(std::memory_order_relaxed); }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  // Pending operations, oldest first (a consistent copy of each; one changing under the read is skipped).
  std::vector<PendingOp> pendingOps() const;
  // The waits since the previous call (since the connection opened, at the first): the period a reporter reads.
  WindowCounts takeWindow();
  // Everything since the connection opened.
  WindowCounts totals() const {
    return {wait_.read(), arrival_.read(), pace_.read(), rateBytesSum_.load(std::memory_order_relaxed), wireBytes(),
            wireNs()};
  }
  // The rated operations' paces since the connection opened.
  WaitHistogram::Counts paceTotals() const { return pace_.read(); }
  // The wire measure since the connection opened: bytes acknowledged, busy time.
  uint64_t wireBytes() const { return wireBytes_.load(std::memory_order_relaxed); }
  uint64_t wireNs() const { return wireNs_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::atomic<uint32_t> seq{0};  // odd while the owner rewrites the slot
    std::atomic<uint32_t> gen{0};
    std::atomic<uint32_t> live{0};
    std::atomic<int32_t> tag{0};
    std::atomic<uint64_t> bytes{0}, bytesDone{0}, postedNs{0}, readyNs{0}, progressNs{0};
    uint64_t order = 0;  // post order (owner only)
    bool idlePost = false;
  };
  Slot* slotOf(OpId op);
  bool olderPending(const Slot& s) const;
  void noteProgress(uint64_t tNs);
  void release(Slot& s, int index);

  const LinkInfo info_;
  Slot slots_[kSlots];
  uint64_t freeMask_ = ~uint64_t{0};  // owner only
  uint64_t postOrder_ = 0;            // owner only
  uint64_t lastDoneNs_ = 0;           // owner only
  WaitHistogram wait_, arrival_, pace_;
  std::mutex readMu_;  // readers only: the last window's start
  WindowCounts lastRead_;
  std::atomic<uint64_t> lastProgressNs_{0}, lastPostNs_{0};
  std::atomic<uint32_t> pending_{0};
  std::atomic<uint64_t> untracked_{0}, completed_{0};
  std::atomic<uint64_t> rateBytesSum_{0};           // cumulative, read per period
  std::atomic<uint64_t> wireBytes_{0}, wireNs_{0};  // cumulative, read per period
};

// The q-quantile (linear between ranks) of values; sorts them. Empty: 0.
double quantile(std::vector<double>& values, double q);

}  // namespace icn::diagnose
