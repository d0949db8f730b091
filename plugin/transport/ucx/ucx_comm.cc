#include "transport/ucx/ucx_comm.h"

#include <cstring>

#include "core/log.h"
#include "core/params.h"
#include "transport/ucx/ucx_context.h"

namespace icn::ucx {

namespace {
// A peer that closed its control socket may still have bytes in flight inside UCX: keep progressing
// this long before turning "peer gone" into an error.
constexpr auto kPeerGoneGrace = std::chrono::milliseconds(300);

void onSendDone(void* request, ucs_status_t status, void* user) {
  auto* s = static_cast<SubRequest*>(user);
  s->status = status;
  s->done = true;
}

void onRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* s = static_cast<SubRequest*>(user);
  s->status = status;
  if (status == UCS_OK) {
    s->length = info->length;
    s->senderTag = info->sender_tag;
  }
  s->done = true;
}

ucs_memory_type_t memType(void* mh) {
  auto* m = static_cast<MemHandle*>(mh);
  return m && m->type == kMemCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

ucp_tag_t wireTag(int tag) { return static_cast<ucp_tag_t>(static_cast<uint32_t>(tag)); }

// Receives match on the 32 bits of the NCCL tag only, so a message whose upper tag bits were set by a
// foreign or hostile sender still lands in (and only in) the buffer posted for it, where test() refuses it.
constexpr ucp_tag_t kNcclTagMask = 0xFFFFFFFFull;
}  // namespace

Status UcxRequest::test(bool* done, int* sizes) { return owner->testRequest(this, done, sizes); }

CommBase::CommBase(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep, ControlChannel control,
                   NetCommInfo info, int ptrSupport, Reaper* reaper)
    : worker_(std::move(worker)),
      ep_(std::move(ep)),
      reaper_(reaper),
      control_(std::move(control)),
      ptrSupport_(ptrSupport),
      watch_(std::make_unique<diagnose::ConnectionWatch>(diagnose::linkInfoFor(info, control_.fd()))) {
  counters_ = netstats::registerComm(info);
}

CommBase::~CommBase() {
  netstats::unregisterComm(counters_);
  reaper_->adopt(std::move(worker_), std::move(ep_));
}

template <typename Pool>
void CommBase::cancelAll(Pool& pool) {
  pool.forEach([&](UcxRequest& r) {
    for (auto& s : r.sub) {
      if (s.ucxReq) {
        ucx().request_cancel(worker_->get(), s.ucxReq);
        ucx().request_free(s.ucxReq);
        s.ucxReq = nullptr;
      }
    }
  });
}

Status CommBase::regMr(void* data, size_t size, int type, void** mh) {
  if (!mh) return Status::InvalidArgument;
  if (!(type & ptrSupport_)) {
    ICN_WARN(subsys::Net, "regMr: memory type %d not supported by the UCX transport here (ptrSupport %d)", type,
             ptrSupport_);
    return Status::InvalidArgument;
  }
  auto m = std::make_unique<MemHandle>();  // registration is rare (per buffer, not per message)
  m->type = type;
  m->base = data;
  m->size = size;
  *mh = m.release();
  return Status::Ok;
}

Status CommBase::deregMr(void* mh) {
  std::unique_ptr<MemHandle> m(static_cast<MemHandle*>(mh));
  return Status::Ok;
}

Status CommBase::checkPeer(UcxRequest* r) {
  if (failed_) return Status::RemoteError;
  if (ep_->failed()) {
    failed_ = true;
    ICN_WARN(subsys::Net, "request (%d message%s, tag %d) to/from %s failed: %s", r->n, r->n == 1 ? "" : "s",
             r->tags[0], peer().c_str(), statusString(ep_->failure()));
    return Status::RemoteError;
  }
  if (control_.checkAlive() == Status::Ok) return Status::Ok;
  auto now = std::chrono::steady_clock::now();
  if (peerGoneAt_ == std::chrono::steady_clock::time_point{}) peerGoneAt_ = now;
  if (now - peerGoneAt_ < kPeerGoneGrace) return Status::Ok;
  failed_ = true;
  ICN_WARN(subsys::Net, "request (%d message%s, tag %d) to/from %s cannot complete: peer is gone", r->n,
           r->n == 1 ? "" : "s", r->tags[0], peer().c_str());
  return Status::RemoteError;
}

Status CommBase::testRequest(UcxRequest* r, bool* done, int* sizes) {
  *done = false;
  if (failed_) return Status::RemoteError;
  worker_->progress();
  reaper_->poll();  // closes of other comms advance while this one works (a no-op when there are none)
  bool all = true;
  for (int i = 0; i < r->n; i++) all = all && r->sub[i].done;
  if (!all) return checkPeer(r);
  Status result = Status::Ok;
  uint64_t bytes = 0;
  for (int i = 0; i < r->n; i++) {
    SubRequest& s = r->sub[i];
    if (s.status != UCS_OK) {
      ICN_WARN(subsys::Net, "UCX transfer with %s failed (tag %d, %zu bytes posted): %s", peer().c_str(), r->tags[i],
               r->posted[i], statusString(s.status));
      result = Status::RemoteError;
    } else if (s.senderTag >> 32) {  // ICN's senders never set these bits: a foreign or hostile peer
      ICN_WARN(subsys::Net, "message from %s (tag %d, %zu bytes) carries UCX tag bits 0x%llx that ICN never sends: "
               "connection refused", peer().c_str(), r->tags[i], s.length,
               static_cast<unsigned long long>(s.senderTag >> 32));
      result = Status::RemoteError;
      failed_ = true;
    }
    if (sizes) sizes[i] = static_cast<int>(s.length);
    bytes += s.length;
    if (s.ucxReq) ucx().request_free(s.ucxReq);
    s.reset();
  }
  counters_->add(bytes);
  const uint64_t now = diagnose::nowNs();
  if (result == Status::Ok) {
    watch_->monitor().ready(r->op, now);
    watch_->monitor().done(r->op, bytes, now);
  } else {
    watch_->monitor().abandon(r->op);
  }
  *done = true;
  r->active = false;
  releaseRequest(r);
  return result;
}

UcxSendComm::~UcxSendComm() {
  cancelAll(pool_);
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "UCX connection to %s closed: %llu messages sent, %llu below UCX's rendezvous threshold "
             "(%zu bytes), %llu from it", peer().c_str(), static_cast<unsigned long long>(belowRndv_ + fromRndv_),
             static_cast<unsigned long long>(belowRndv_), rndvFrom_, static_cast<unsigned long long>(fromRndv_));
}

Status UcxSendComm::isend(void* data, size_t size, int tag, void* mhandle, Request** request) {
  *request = nullptr;
  if (ep_->failed() || failed_) {
    ICN_WARN(subsys::Net, "isend to %s: connection failed earlier: %s", peer().c_str(),
             ep_->failed() ? statusString(ep_->failure()) : "peer is gone");
    return Status::RemoteError;
  }
  if (size > 0 && !data) return Status::InvalidArgument;
  UcxRequest* r = pool_.acquire();
  if (!r) return Status::Ok;  // every request in flight: NCCL retries once test() has returned one
  r->owner = this;
  r->n = 1;
  r->posted[0] = size;
  r->tags[0] = tag;
  SubRequest& s = r->sub[0];
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.cb.send = onSendDone;
  p.user_data = &s;
  p.memory_type = memType(mhandle);
  ucs_status_ptr_t st = ucx().tag_send_nbx(ep_->get(), data, size, wireTag(tag), &p);
  if (UCS_PTR_IS_ERR(st)) {
    ICN_WARN(subsys::Net, "isend of %zu bytes to %s: %s", size, peer().c_str(), statusString(UCS_PTR_STATUS(st)));
    pool_.release(r);
    return Status::RemoteError;
  }
  s.length = size;
  r->op = watch_->monitor().onSendPosted(tag, size, diagnose::nowNs());
  (size >= rndvFrom_ ? fromRndv_ : belowRndv_)++;
  if (st == nullptr)
    s.done = true;
  else
    s.ucxReq = st;
  *request = r;
  return Status::Ok;
}

UcxRecvComm::~UcxRecvComm() { cancelAll(pool_); }

Status UcxRecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                          Request** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs || !data || !sizes || !tags) {
    ICN_WARN(subsys::Net, "irecv from %s: bad arguments (n=%d, at most %d grouped receives)", peer().c_str(), n,
             kMaxRecvs);
    return Status::InvalidArgument;
  }
  if (failed_) return Status::RemoteError;
  UcxRequest* r = pool_.acquire();
  if (!r) {
    ICN_WARN(subsys::Net, "irecv from %s: more than %d requests in flight", peer().c_str(), kMaxRequests);
    return Status::InvalidUsage;
  }
  r->owner = this;
  r->n = n;
  r->active = true;
  for (int i = 0; i < n; i++) {
    r->bufs[i] = data[i];
    r->posted[i] = sizes[i];
    r->tags[i] = tags[i];
    SubRequest& s = r->sub[i];
    ucp_request_param_t p{};
    // Always complete through the callback: UCX 1.13 leaves recv_info's length at 0 on immediate completion.
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = onRecvDone;
    p.user_data = &s;
    p.memory_type = memType(mhandles ? mhandles[i] : nullptr);
    ucs_status_ptr_t st = ucx().tag_recv_nbx(worker_->get(), data[i], sizes[i], wireTag(tags[i]), kNcclTagMask, &p);
    if (UCS_PTR_IS_ERR(st)) {
      s.done = true;
      s.status = UCS_PTR_STATUS(st);
    } else if (st == nullptr) {  // not expected with NO_IMM_CMPL; treat as an unknown length
      s.done = true;
      s.status = UCS_ERR_NO_MESSAGE;
    } else {
      s.ucxReq = st;
    }
  }
  uint64_t postedBytes = 0;
  for (int i = 0; i < n; i++) postedBytes += sizes[i];
  r->op = watch_->monitor().onRecvPosted(tags[0], postedBytes, diagnose::nowNs());
  *request = r;
  return Status::Ok;
}

}  // namespace icn::ucx
