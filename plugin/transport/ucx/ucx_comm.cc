#include "transport/ucx/ucx_comm.h"

#include "core/log.h"
#include "core/params.h"
#include "transport/ucx/ucx_context.h"

namespace icn::ucx {

namespace {
// A peer that closed its control socket may still have bytes in flight inside UCX: keep progressing
// this long before turning "peer gone" into an error.
constexpr auto kPeerGoneGrace = std::chrono::milliseconds(300);
constexpr int kCloseTimeoutMs = 2000;

void onSendDone(void* request, ucs_status_t status, void* user) {
  auto* s = static_cast<SubRequest*>(user);
  s->status = status;
  s->done = true;
}

void onRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* s = static_cast<SubRequest*>(user);
  s->status = status;
  if (status == UCS_OK) s->length = info->length;
  s->done = true;
}

ucs_memory_type_t memType(void* mh) {
  auto* m = static_cast<MemHandle*>(mh);
  return m && m->type == kMemCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}
}  // namespace

Status UcxRequest::test(bool* done, int* sizes) { return owner->testRequest(this, done, sizes); }

CommBase::CommBase(std::unique_ptr<Worker> worker, ControlChannel control, NetCommInfo info, int ptrSupport)
    : worker_(std::move(worker)), control_(std::move(control)), ptrSupport_(ptrSupport) {
  counters_ = netstats::registerComm(info);
}

CommBase::~CommBase() { netstats::unregisterComm(counters_); }

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
  worker_->progress();
  bool all = true;
  for (int i = 0; i < r->n; i++) all = all && r->sub[i].done;
  if (!all) return checkPeer(r);
  Status result = Status::Ok;
  for (int i = 0; i < r->n; i++) {
    SubRequest& s = r->sub[i];
    if (s.status != UCS_OK) {
      ICN_WARN(subsys::Net, "UCX transfer with %s failed (tag %d, %zu bytes posted): %s", peer().c_str(), r->tags[i],
               r->posted[i], statusString(s.status));
      result = Status::RemoteError;
    }
    if (sizes) sizes[i] = static_cast<int>(s.length);
    if (s.ucxReq) ucp_request_free(s.ucxReq);
    s = SubRequest{};
  }
  *done = true;
  releaseRequest(r);
  return result;
}

UcxSendComm::UcxSendComm(std::unique_ptr<Worker> worker, ucp_ep_h ep, std::unique_ptr<EpError> epErr,
                         ControlChannel control, NetCommInfo info, int ptrSupport)
    : CommBase(std::move(worker), std::move(control), std::move(info), ptrSupport), ep_(ep), epErr_(std::move(epErr)) {}

void UcxSendComm::onEpError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* e = static_cast<EpError*>(arg);
  e->failed = true;
  e->status = status;
}

UcxSendComm::~UcxSendComm() {
  pool_.forEach([&](UcxRequest& r) {
    for (auto& s : r.sub)
      if (s.ucxReq) {
        ucp_request_cancel(worker_->get(), s.ucxReq);
        ucp_request_free(s.ucxReq);
      }
  });
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = epErr_->failed ? UCP_EP_CLOSE_FLAG_FORCE : 0;  // flush what was sent unless the peer is gone
  ucs_status_t st = waitRequest(*worker_, ucp_ep_close_nbx(ep_, &p), kCloseTimeoutMs);
  if (st != UCS_OK && !epErr_->failed && st != UCS_ERR_CANCELED)
    ICN_INFO(subsys::Net, "closing UCX endpoint to %s: %s", peer().c_str(), statusString(st));
}

Status UcxSendComm::isend(void* data, size_t size, int tag, void* mhandle, Request** request) {
  *request = nullptr;
  if (epErr_->failed) {
    ICN_WARN(subsys::Net, "isend to %s: endpoint failed earlier: %s", peer().c_str(), statusString(epErr_->status));
    return Status::RemoteError;
  }
  if (size > 0 && !data) return Status::InvalidArgument;
  UcxRequest* r = pool_.acquire();
  if (!r) {
    ICN_WARN(subsys::Net, "isend to %s: more than %zu requests in flight", peer().c_str(), pool_.capacity());
    return Status::InvalidUsage;
  }
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
  ucs_status_ptr_t st = ucp_tag_send_nbx(ep_, data, size, static_cast<ucp_tag_t>(static_cast<uint32_t>(tag)), &p);
  if (UCS_PTR_IS_ERR(st)) {
    ICN_WARN(subsys::Net, "isend of %zu bytes to %s: %s", size, peer().c_str(), statusString(UCS_PTR_STATUS(st)));
    pool_.release(r);
    return Status::RemoteError;
  }
  s.length = size;
  if (st == nullptr)
    s.done = true;
  else
    s.ucxReq = st;
  counters_->add(size);
  *request = r;
  return Status::Ok;
}

UcxRecvComm::~UcxRecvComm() {
  pool_.forEach([&](UcxRequest& r) {
    for (auto& s : r.sub)
      if (s.ucxReq) {
        ucp_request_cancel(worker_->get(), s.ucxReq);
        worker_->progress();
        ucp_request_free(s.ucxReq);
      }
  });
}

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
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    r->posted[i] = sizes[i];
    r->tags[i] = tags[i];
    SubRequest& s = r->sub[i];
    ucp_tag_recv_info_t info{};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                     UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.recv = onRecvDone;
    p.user_data = &s;
    p.recv_info.tag_info = &info;
    p.memory_type = memType(mhandles ? mhandles[i] : nullptr);
    ucs_status_ptr_t st = ucp_tag_recv_nbx(worker_->get(), data[i], sizes[i],
                                           static_cast<ucp_tag_t>(static_cast<uint32_t>(tags[i])), ~ucp_tag_t{0}, &p);
    if (UCS_PTR_IS_ERR(st)) {
      s.done = true;
      s.status = UCS_PTR_STATUS(st);
    } else if (st == nullptr) {
      s.done = true;
      s.length = info.length;
    } else {
      s.ucxReq = st;
    }
    total += sizes[i];
  }
  counters_->add(total);
  *request = r;
  return Status::Ok;
}

}  // namespace icn::ucx
