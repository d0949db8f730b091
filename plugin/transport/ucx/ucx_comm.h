// UCX send/receive comms: tag-matched messages (the NCCL tag is the UCX tag; one sender per receive
// worker, so no comm bits are needed), request pools, progress from test(). Every byte travels through
// UCX: no peer-supplied address is ever read or written here.
#pragma once
#include "transport/ucx/ucx_lib.h"

#include <chrono>
#include <memory>
#include <string>

#include "core/fixed_pool.h"
#include "core/handshake.h"
#include "core/net_counters.h"
#include "core/transport.h"
#include "diagnose/watch.h"
#include "transport/ucx/ucx_endpoint.h"
#include "transport/ucx/ucx_reaper.h"
#include "transport/ucx/ucx_worker.h"

namespace icn::ucx {

class CommBase;

struct SubRequest {
  volatile bool done = false;  // UCX finished (callback)
  ucs_status_t status = UCS_OK;
  size_t length = 0;
  ucp_tag_t senderTag = 0;
  void* ucxReq = nullptr;
  void reset() {
    done = false;
    status = UCS_OK;
    length = 0;
    senderTag = 0;
    ucxReq = nullptr;
  }
};

class UcxRequest final : public Request {
 public:
  Status test(bool* done, int* sizes) override;
  CommBase* owner = nullptr;
  int n = 0;
  bool active = false;  // between irecv and the test() that completes it
  void* bufs[kMaxRecvs] = {};
  size_t posted[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  SubRequest sub[kMaxRecvs];
  diagnose::OpId op = diagnose::kNoOp;  // the diagnosis's operation (NCCL's proxy thread only)
};

struct MemHandle {
  int type = kMemHost;
  void* base = nullptr;
  size_t size = 0;
};

class CommBase {
 public:
  CommBase(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep, ControlChannel control, NetCommInfo info,
           int ptrSupport, Reaper* reaper);
  virtual ~CommBase();  // hands the worker and endpoint to the reaper: returns without waiting for the peer
  Status regMr(void* data, size_t size, int type, void** mh);
  Status deregMr(void* mh);
  Status testRequest(UcxRequest* r, bool* done, int* sizes);
  const std::string& peer() const { return control_.peerName(); }
  ucp_ep_h endpoint() const { return ep_->get(); }

 protected:
  virtual void releaseRequest(UcxRequest* r) = 0;
  Status checkPeer(UcxRequest* r);
  template <typename Pool>
  void cancelAll(Pool& pool);

  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Endpoint> ep_;  // destroyed before the worker
  Reaper* reaper_;
  ControlChannel control_;
  std::shared_ptr<NetCounters> counters_;
  int ptrSupport_;
  bool failed_ = false;
  std::chrono::steady_clock::time_point peerGoneAt_{};
  // The diagnosis's view of this connection: posts and completions (UCX shows no first byte or clear-to-send
  // before a tag completes, so the completion is the first byte too).
  std::unique_ptr<diagnose::ConnectionWatch> watch_;
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
  // UCX's rendezvous threshold on this endpoint (rendezvousFrom): messages are counted on either side of it, and
  // the counts logged at close.
  void setRendezvousFrom(size_t bytes) { rndvFrom_ = bytes; }

 private:
  void releaseRequest(UcxRequest* r) override { pool_.release(r); }
  FixedPool<UcxRequest, kMaxRequests * kMaxRecvs> pool_;
  size_t rndvFrom_ = SIZE_MAX;
  uint64_t belowRndv_ = 0, fromRndv_ = 0;
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
  Status iflush(int, void**, const int*, void**, Request** request) override {
    *request = nullptr;  // data lands in host memory through the CPU: nothing to flush
    return Status::Ok;
  }

 private:
  void releaseRequest(UcxRequest* r) override { pool_.release(r); }
  FixedPool<UcxRequest, kMaxRequests> pool_;
};

}  // namespace icn::ucx
