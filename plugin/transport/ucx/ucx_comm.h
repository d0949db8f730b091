// UCX send/receive comms: tag-matched messages (the NCCL tag is the UCX tag; one sender per receive
// worker, so no comm bits are needed), request pools, progress from test(), and the same-host fast
// path (fast_path.h) for large messages.
#pragma once
#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/copy_engine.h"
#include "core/fixed_pool.h"
#include "core/handshake.h"
#include "core/net_counters.h"
#include "core/transport.h"
#include "transport/ucx/fast_path.h"
#include "transport/ucx/ucx_endpoint.h"
#include "transport/ucx/ucx_reaper.h"
#include "transport/ucx/ucx_worker.h"

namespace icn::ucx {

class CommBase;

class ArrivalQueue;
class UcxRequest;

struct SubRequest {
  volatile bool done = false;  // UCX finished (callback)
  ucs_status_t status = UCS_OK;
  size_t length = 0;
  ucp_tag_t senderTag = 0;
  void* ucxReq = nullptr;
  // Fast path, receive side: the descriptor arrived and the pull is under way.
  bool pulling = false;
  FastDescriptor desc{};
  CopyCompletion copy;
  // Receive side with the fast path: where the completion callback reports an arrived descriptor,
  // and which request slot this is (so test() visits only what arrived, not every slot).
  ArrivalQueue* arrivals = nullptr;
  UcxRequest* parent = nullptr;
  int index = 0;
  void reset() {
    done = false;
    status = UCS_OK;
    length = 0;
    senderTag = 0;
    ucxReq = nullptr;
    pulling = false;
  }
};

// Sub-requests whose fast-path descriptor arrived since the last test(): filled by UCX's completion
// callback (inside worker progress, on the thread that calls test()), drained right after it. Each
// posted receive completes once, so the ring never holds more than every slot of a comm.
class ArrivalQueue {
 public:
  void push(SubRequest* s) {
    if (count_ < kCapacity) ring_[(head_ + count_++) % kCapacity] = s;
  }
  SubRequest* pop() {
    if (count_ == 0) return nullptr;
    SubRequest* s = ring_[head_];
    head_ = (head_ + 1) % kCapacity;
    count_--;
    return s;
  }

 private:
  static constexpr size_t kCapacity = kMaxRequests * kMaxRecvs;
  SubRequest* ring_[kCapacity] = {};
  size_t head_ = 0, count_ = 0;
};

class UcxRequest final : public Request {
 public:
  Status test(bool* done, int* sizes) override;
  CommBase* owner = nullptr;
  int n = 0;
  bool active = false;  // between irecv and the test() that completes it
  bool fastSend = false;
  alignas(8) uint64_t fastDone = 0;  // written by the receiver (same host) when it has pulled the data
  FastDescriptor desc{};             // what a fast send ships (must outlive the UCX send)
  void* bufs[kMaxRecvs] = {};
  size_t posted[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  SubRequest sub[kMaxRecvs];
};

struct MemHandle {
  int type = kMemHost;
  void* base = nullptr;
  size_t size = 0;
};

class CommBase {
 public:
  CommBase(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep, ControlChannel control, NetCommInfo info,
           int ptrSupport, bool fastPath, Reaper* reaper);
  virtual ~CommBase();  // hands the worker and endpoint to the reaper: returns without waiting for the peer
  Status regMr(void* data, size_t size, int type, void** mh);
  Status deregMr(void* mh);
  Status testRequest(UcxRequest* r, bool* done, int* sizes);
  const std::string& peer() const { return control_.peerName(); }

 protected:
  virtual void releaseRequest(UcxRequest* r) = 0;
  Status checkPeer(UcxRequest* r);
  // Receive side: turns a completed descriptor into a pull; *finished once the bytes are here.
  Status advanceFast(UcxRequest* r, int i, bool* finished);
  virtual Status startArrivedPulls() { return Status::Ok; }
  template <typename Pool>
  void cancelAll(Pool& pool);

  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Endpoint> ep_;  // destroyed before the worker
  Reaper* reaper_;
  ControlChannel control_;
  std::shared_ptr<NetCounters> counters_;
  int ptrSupport_;
  bool fastPath_;
  size_t fastMin_;
  bool failed_ = false;
  std::chrono::steady_clock::time_point peerGoneAt_{};
};

class UcxSendComm final : public SendComm, public CommBase {
 public:
  using CommBase::CommBase;
  ~UcxSendComm() override;
  Status regMr(void* data, size_t size, int type, void** mh) override { return CommBase::regMr(data, size, type, mh); }
  Status regMrDmaBuf(void* data, size_t size, int type, uint64_t, int, void** mh) override {
    return CommBase::regMr(data, size, type, mh);
  }
  Status deregMr(void* mh) override { return CommBase::deregMr(mh); }
  Status isend(void* data, size_t size, int tag, void* mhandle, Request** request) override;

 private:
  void releaseRequest(UcxRequest* r) override { pool_.release(r); }
  FixedPool<UcxRequest, kMaxRequests * kMaxRecvs> pool_;
};

class UcxRecvComm final : public RecvComm, public CommBase {
 public:
  using CommBase::CommBase;
  ~UcxRecvComm() override;
  Status regMr(void* data, size_t size, int type, void** mh) override { return CommBase::regMr(data, size, type, mh); }
  Status regMrDmaBuf(void* data, size_t size, int type, uint64_t, int, void** mh) override {
    return CommBase::regMr(data, size, type, mh);
  }
  Status deregMr(void* mh) override { return CommBase::deregMr(mh); }
  Status irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles, Request** request) override;
  Status startArrivedPulls() override;
  Status iflush(int, void**, const int*, void**, Request** request) override {
    *request = nullptr;  // data lands in host memory through the CPU: nothing to flush
    return Status::Ok;
  }

 private:
  void releaseRequest(UcxRequest* r) override { pool_.release(r); }
  FixedPool<UcxRequest, kMaxRequests> pool_;
  ArrivalQueue arrivals_;
};

}  // namespace icn::ucx
