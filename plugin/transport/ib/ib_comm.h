// ib send/receive comms: the receiver-driven data path.
//
//   receiver irecv:  writes CTS entries {addr, rkeys, size, tag, seq} into the sender's FIFO slot (RDMA write)
//   sender isend:    finds the CTS entry with its tag, RDMA-writes the payload with write-with-immediate, split
//                    across the connection's QPs; the immediate names slot/sub-request/chunk count
//   receiver test(): counts the immediates per sub-request; done when every chunk of every sub-request is in
//
// Requests come from fixed pools (no allocation per message); progress happens in test().
#pragma once
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/coarse_clock.h"
#include "core/fixed_pool.h"
#include "core/handshake.h"
#include "core/net_counters.h"
#include "core/transport.h"
#include "diagnose/watch.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_qp.h"
#include "transport/ib/ib_wire.h"

namespace icn::ib {

class CommBase;

// What regMr hands to NCCL: one cache entry per member device of the comm.
struct MemHandle {
  int type = kMemHost;
  int n = 0;
  MrEntry* entries[kMaxVDevMembers] = {};
  Hca* hcas[kMaxVDevMembers] = {};
};

struct IbRequest final : public Request {
  Status test(bool* done, int* sizes) override;
  enum class Kind : uint8_t { Send, Recv, Flush };
  CommBase* owner = nullptr;
  Kind kind = Kind::Send;
  bool inUse = false;
  int n = 1;
  int pending = 0;        // send/flush: signalled work requests not yet completed
  int subsDone = 0;       // recv: sub-requests with every chunk in
  uint32_t seq = 0;       // recv: request sequence number (slot = seq % kFifoSlots)
  uint64_t bytes[kMaxRecvs] = {};   // send: [0] = size; recv: bytes received per sub-request
  uint64_t posted[kMaxRecvs] = {};  // recv: bytes posted per sub-request (what the peer may write)
  int tags[kMaxRecvs] = {};
  void* data = nullptr;   // send: payload, posted once a matching clear-to-send arrives
  uint64_t remoteAddr = 0;  // send: where it went (for error messages)
  MemHandle* mh = nullptr;
  int ntmp = 0;           // temporary registrations (buffers passed without a memory handle)
  MemHandle* tmp[kMaxRecvs] = {};
  diagnose::OpId op = diagnose::kNoOp;  // the diagnosis's operation (NCCL's proxy thread only)
  bool started = false;   // send: its clear-to-send came (it was posted); recv: its first chunk landed
  // send, once posted: where each chunk went and what is known of it (failover resends from this).
  bool sent = false;
  uint32_t slot = 0;      // FIFO slot and sub-request of its clear-to-send (seq: the receive's sequence)
  uint8_t sub = 0;
  uint8_t nchunks = 0;
  uint8_t ways = 0;       // QPs the message was split for (the split is recomputed from it)
  uint16_t open = 0;      // chunks not yet known to be delivered
  uint16_t lost = 0;      // open chunks whose link died: waiting for the receiver's report
  uint8_t qpOf[kMaxQps] = {};
  uint32_t ctsRkeys[kMaxVDevMembers] = {};
  // recv: chunks in per sub-request (each counted once) and the count the sender announced
  uint16_t have[kMaxRecvs] = {};
  uint8_t expect[kMaxRecvs] = {};
};

class CommBase {
 public:
  CommBase(std::vector<const Port*> ports, bool isSend);
  virtual ~CommBase();
  Status regMrImpl(void* data, size_t size, int type, int fd, uint64_t offset, void** mh);
  Status deregMrImpl(void* mh);
  Status testRequest(IbRequest* r, bool* done, int* sizes);
  // Creates the CQs and `nqps` QPs (QP i on member i % members); receivers pre-post receives.
  Status createQps(int nqps, std::string* why);
  Status connectQps(const ConnBlob& peer, const QpTuning& t, std::string* why);
  // Handshake finished: liveness channel and telemetry.
  void start(ControlChannel control, NetCommInfo info);
  const std::string& peer() const { return peerName_; }
  int qpCount() const { return int(qps_.size()); }
  const Port& port(int i) const { return *ports_[i]; }
  int members() const { return int(ports_.size()); }
  std::vector<DevAddr> localAddrs() const;
  std::vector<uint32_t> qpNumbers() const;

 protected:
  static constexpr uint64_t kRecvWrTag = 1ull << 63;  // receive WRs: tag | QP index
  static constexpr uint64_t kCtsWrId = 1;             // CTS writes: nothing to account
  static constexpr int kQueueDepth = kFifoSlots * kMaxRecvs;

  Status poll();
  virtual Status progress() { return Status::Ok; }  // work to do before polling (sender: queued sends)
  virtual Status onCompletion(const ibv_wc& wc) = 0;
  // A work request that failed on a QP of a dead link (flushed, or the error that killed the link).
  virtual Status onFailedCompletion(const ibv_wc& wc) = 0;

  // Failover. With the same number (>= 2) of member devices on both ends, member k of each end forms link k and
  // QP i runs over link i % members. A link dies on a completion error, a stalled QP or a port going down on
  // either end; its QPs move to the error state and the connection goes on over the others: the sender marks
  // the chunks it had on that link lost and sends a fence note, the receiver answers with what it holds (a
  // report), the sender resends exactly the chunks the receiver lacks. Only the last link's death fails the
  // connection. A dead link stays dead for the life of the connection.
  int linkOf(int qp) const { return qp % int(ports_.size()); }
  bool linkDead(int link) const { return deadLinks_ & (1u << link); }
  bool qpLive(int qp) const { return !linkDead(linkOf(qp)); }
  int qpIndex(uint32_t qpNum, const ibv_cq* cq) const;
  Status loseLink(int link, const std::string& why);
  virtual void onLinkLost(int link) = 0;
  virtual Status onNote(const FailoverNote& n) = 0;
  virtual Status finishFailover() { return Status::Ok; }  // after the notes are read (receiver: the report)
  // Reads the peer's failover notes (rate-limited with the liveness check); errors only for a broken note.
  Status serviceControl();
  bool sendNote(const FailoverNote& n);
  // Re-admission: fresh QPs for a dead link (at its QP indices), connected to the peer's and swapped in; the old
  // ones are kept (retired) until the comm closes, so their late completions still name a known QP.
  static constexpr int kRetiredQp = -2;           // qpIndex() of a retired QP
  static constexpr size_t kMaxRetiredQps = 64;    // re-admissions stop once this many QPs were retired
  std::vector<int> qpsOfLink(int link) const;
  bool canRetire(int link) const { return retired_.size() + qpsOfLink(link).size() <= kMaxRetiredQps; }
  Status makeQp(int i, QpPtr* out, std::string* why);
  Status readmit(int link, std::vector<QpPtr>* fresh, const std::vector<uint32_t>& peerQpns, std::string* why);
  virtual std::string describeWr(uint64_t wrId) const { return ""; }
  virtual void release(IbRequest* r) = 0;
  Status checkHealth(const IbRequest* r);
  // Marks the comm failed (first reason wins, one WARN naming the peer), moves its QPs to the error state (the
  // provider stops retransmitting) and tells the peer through the control connection, whose side may have
  // nothing in flight that could fail.
  Status fail(Status st, const std::string& why);
  // Silent-loss watchdog. A signalled work request on an RC QP completes (or fails with RETRY_EXC_ERR) within
  // the QP's retry budget, whatever the remote process does: the remote NIC acknowledges. Some providers never
  // report the failure: rxe, when its own IP layer refuses the packets (e.g. an MTU below the path MTU), rolls
  // the request back and resends forever without arming the retransmit timer. So a QP with signalled work in
  // flight and no completion for longer than the budget (plus a margin) fails the comm.
  void notePosted(int qp) {
    if (watch_[qp].inFlight++ == 0) watch_[qp].since = coarseNow();
  }
  void noteCompleted(int qp);  // qpIndex() of the completion's QP (negative: not a data QP)
  Status checkStall();
  // A buffer that comes without a memory handle (NCCL always registers; tools may not) is registered through
  // the cache for the life of the request. Slow path, never taken by NCCL itself.
  Status tempHandle(IbRequest* r, void* data, size_t size, MemHandle** out);
  void releaseTemps(IbRequest* r);
  Status postRecvs(int qp, int count) { return postRecvsOn(qps_[qp].get(), qp, count); }
  Status postRecvsOn(ibv_qp* qp, int index, int count);
  // The diagnosis's view of this connection (null before start()): a send's clear-to-send is when it is posted
  // (its CTS was in the FIFO), a receive's first byte is its first write-with-immediate completion.
  diagnose::LinkMonitor* monitor() { return diag_ ? &diag_->monitor() : nullptr; }
  void diagnosePosted(IbRequest* r, int tag, uint64_t bytes, bool send);
  void diagnoseStarted(IbRequest* r, uint64_t now = 0);  // now: 0 reads the clock, only on the first call

  std::vector<const Port*> ports_;
  bool isSend_;
  std::vector<CqPtr> cqs_;   // one per member device; destroyed after the QPs (declared first)
  std::vector<QpPtr> qps_;
  int qp0Inline_ = 0;  // inline bytes granted on QP 0 (carries the CTS writes)
  QpFaultSink sink_;
  ControlChannel control_;
  std::string peerName_ = "(connecting)";
  std::shared_ptr<NetCounters> counters_;
  std::vector<std::shared_ptr<RailCounters>> linkCounters_;  // per member port (null past the registry's bound)
  RailCounters* linkCounter(int link) const {
    return size_t(link) < linkCounters_.size() ? linkCounters_[link].get() : nullptr;
  }
  Status failed_ = Status::Ok;
  struct QpWatch {
    int inFlight = 0;                                // signalled work requests posted, not completed
    std::chrono::steady_clock::time_point since{};   // last completion, or the post that started the wait
  };
  std::vector<QpWatch> watch_;                       // one per QP of qps_
  std::chrono::steady_clock::duration stallLimit_ = std::chrono::hours(24);
  QpTuning tuning_;
  std::chrono::steady_clock::time_point peerGoneAt_{};
  std::unique_ptr<diagnose::ConnectionWatch> diag_;
  int links_ = 1;           // > 1: failover between links (see linkOf)
  uint32_t deadLinks_ = 0;
  std::vector<QpPtr> retired_;   // QPs of dead links replaced by a re-admission (before cqs_ in the destructor)
  std::vector<DevAddr> peerDevs_;
};

class IbSendComm final : public SendComm, public CommBase {
 public:
  explicit IbSendComm(std::vector<const Port*> ports) : CommBase(std::move(ports), true) {}
  ~IbSendComm() override;
  Status init(int nqps, std::string* why);  // QPs + the CTS FIFO
  ConnBlob localBlob() const;
  void setPeerMembers(int n) { peerMembers_ = n; }

  Status regMr(void* data, size_t size, int type, void** mh) override { return regMrImpl(data, size, type, -1, 0, mh); }
  Status regMrDmaBuf(void* data, size_t size, int type, uint64_t offset, int fd, void** mh) override {
    return regMrImpl(data, size, type, fd, offset, mh);
  }
  Status deregMr(void* mh) override { return deregMrImpl(mh); }
  // Queues the send and returns its request at once; it is written when the receiver's matching CTS is in
  // the FIFO (progress() from isend/test). Sends are matched in the order they were queued.
  Status isend(void* data, size_t size, int tag, void* mhandle, Request** request) override;

 private:
  Status progress() override;
  Status post(IbRequest* r, const CtsEntry& cts, uint32_t slot, int sub);
  Status postChunk(IbRequest* r, int chunk, int qp);
  Status onCompletion(const ibv_wc& wc) override;
  Status onFailedCompletion(const ibv_wc& wc) override;
  IbRequest* requestOf(uint64_t wrId, int* chunk);
  void onLinkLost(int link) override;
  Status onNote(const FailoverNote& n) override;
  Status resendLost(IbRequest* r, const FailoverNote& report, int* resent);
  int nextLiveQp();
  // Re-admission of dead links: offered (Rejoin) once our port is back and every chunk lost on the link settled,
  // 0.5 s after the link died, the wait doubling (to 8 s) when it dies again within 10 s of a return; after a
  // refusal (the receiver's port is not back) the next offer comes at least a second later.
  Status maybeRejoin();
  Status onRejoinAnswer(const FailoverNote& n);
  struct Rejoin {
    std::vector<QpPtr> fresh;  // offered to the receiver, not yet connected
    uint32_t offer = 0;        // the number of that offer: only its answer connects them
    std::chrono::steady_clock::time_point diedAt{}, nextTry{}, offeredAt{}, admittedAt{};
    std::chrono::milliseconds backoff{500};
  };
  std::array<Rejoin, kMaxVDevMembers> rejoin_;
  uint32_t offers_ = 0;  // rejoin offers made on this connection
  std::string describeWr(uint64_t wrId) const override;
  void release(IbRequest* r) override;

  IbRequest* queue_[kMaxRequests * kMaxRecvs] = {};  // sends waiting for a CTS, oldest first
  int queued_ = 0;

  AlignedPtr<CtsSlot> fifo_;
  std::vector<MrPtr> fifoMrs_;  // one per member device
  uint64_t seq_ = 0;            // FIFO slot sequence being consumed
  uint32_t usedMask_ = 0;       // sub-requests of the current slot already sent
  int peerMembers_ = 1;
  int rr_ = 0;                  // round robin over live QPs for resends
  FixedPool<IbRequest, kMaxRequests * kMaxRecvs> pool_;
};

class IbRecvComm final : public RecvComm, public CommBase {
 public:
  explicit IbRecvComm(std::vector<const Port*> ports) : CommBase(std::move(ports), false) {}
  ~IbRecvComm() override;
  // Sets up everything from the sender's blob: QPs (its count), connection, staging, flush QP.
  Status init(const ConnBlob& peer, const QpTuning& t, std::string* why);
  ConnBlob localBlob() const;

  Status regMr(void* data, size_t size, int type, void** mh) override { return regMrImpl(data, size, type, -1, 0, mh); }
  Status regMrDmaBuf(void* data, size_t size, int type, uint64_t offset, int fd, void** mh) override {
    return regMrImpl(data, size, type, fd, offset, mh);
  }
  Status deregMr(void* mh) override { return deregMrImpl(mh); }
  Status irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles, Request** request) override;
  Status iflush(int n, void** data, const int* sizes, void** mhandles, Request** request) override;

 private:
  Status onCompletion(const ibv_wc& wc) override;
  Status onFailedCompletion(const ibv_wc& wc) override;
  Status onChunk(const ibv_wc& wc);
  void release(IbRequest* r) override;
  void onLinkLost(int link) override;
  Status onNote(const FailoverNote& n) override;
  Status finishFailover() override;
  Status postCts(uint32_t slot, int n, bool signalled);
  Status moveCts();
  Status onRejoin(const FailoverNote& n);

  // Receive requests are pooled independently of FIFO slots (NCCL may test them in any order); slotReq_ maps a
  // slot to the request whose data is still arriving there. A slot is reusable once that data is complete.
  FixedPool<IbRequest, kMaxRequests> pool_;
  IbRequest* slotReq_[kFifoSlots] = {};
  uint64_t seq_ = 0;
  AlignedPtr<CtsSlot> stage_;   // our CTS entries, source of the RDMA write into the sender's FIFO
  std::vector<MrPtr> stageMrs_;  // one per member device (the CTS moves to another link on failover)
  uint64_t remoteFifo_ = 0;
  std::array<uint32_t, kMaxVDevMembers> remoteFifoRkeys_{};
  int ctsQp_ = 0;               // the QP that carries the CTS writes
  int peerMembers_ = 1;
  uint32_t reportDue_ = 0;      // links whose report the sender is owed
  bool ctsMoveDue_ = false;
  // GPU flush: a QP connected to itself; a 1-byte RDMA read from the received buffer into flushBuf_.
  QpPtr flushQp_;
  AlignedPtr<uint8_t> flushBuf_;
  MrPtr flushMr_;
  bool flushAll_ = false;  // testing: flush host memory too
  FixedPool<IbRequest, kMaxRequests> flushPool_;
};

// Test hook for the VM suite: make iflush issue the loopback RDMA read for host memory as well, so the flush
// path runs on rxe (no GPU there).
void setFlushHostMemoryForTesting(bool on);

}  // namespace icn::ib
