#include "transport/ucx/ucx_comm.h"

#include <unistd.h>

#include <cstring>

#include <thread>

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
  if (status == UCS_OK && (s->senderTag & kDescBit) && s->arrivals) s->arrivals->push(s);
}

ucs_memory_type_t memType(void* mh) {
  auto* m = static_cast<MemHandle*>(mh);
  return m && m->type == kMemCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

ucp_tag_t wireTag(int tag) { return static_cast<ucp_tag_t>(static_cast<uint32_t>(tag)); }
}  // namespace

Status UcxRequest::test(bool* done, int* sizes) { return owner->testRequest(this, done, sizes); }

CommBase::CommBase(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep, ControlChannel control,
                   NetCommInfo info, int ptrSupport, bool fastPath, Reaper* reaper)
    : worker_(std::move(worker)),
      ep_(std::move(ep)),
      reaper_(reaper),
      control_(std::move(control)),
      ptrSupport_(ptrSupport),
      fastPath_(fastPath),
      fastMin_(static_cast<size_t>(params::getInt(params::Id::CopyMinBytes))) {
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
        ucp_request_cancel(worker_->get(), s.ucxReq);
        ucp_request_free(s.ucxReq);
        s.ucxReq = nullptr;
      }
      while (s.pulling && !s.copy.done()) std::this_thread::yield();  // copy threads write into this request
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

Status CommBase::advanceFast(UcxRequest* r, int i, bool* finished) {
  SubRequest& s = r->sub[i];
  *finished = false;
  if (!s.pulling) {
    memcpy(&s.desc, r->bufs[i], sizeof s.desc);  // the descriptor landed in the receive buffer
    if (s.length != sizeof s.desc || s.desc.magic != kDescMagic) {
      ICN_WARN(subsys::Net, "malformed fast-path descriptor from %s (tag %d)", peer().c_str(), r->tags[i]);
      return Status::RemoteError;
    }
    if (s.desc.size > r->posted[i]) {
      ICN_WARN(subsys::Net, "message of %llu bytes from %s exceeds the %zu-byte receive buffer (tag %d)",
               static_cast<unsigned long long>(s.desc.size), peer().c_str(), r->posted[i], r->tags[i]);
      return Status::InvalidUsage;
    }
    s.copy.notifyPid = static_cast<pid_t>(s.desc.pid);
    s.copy.notifyWord = reinterpret_cast<uint64_t*>(s.desc.doneWord);
    ICN_CHECK(CopyEngine::instance()->submit(static_cast<pid_t>(s.desc.pid), r->bufs[i],
                                              reinterpret_cast<const void*>(s.desc.src), s.desc.size, &s.copy));
    s.pulling = true;
  }
  if (!s.copy.done()) return Status::Ok;
  s.pulling = false;
  int err = s.copy.errnoValue.load(std::memory_order_relaxed);
  if (err) {
    ICN_WARN(subsys::Net, "pulling %llu bytes from %s (pid %lld) failed: %s", static_cast<unsigned long long>(s.desc.size),
             peer().c_str(), static_cast<long long>(s.desc.pid), strerror(err));
    return Status::RemoteError;
  }
  s.length = s.desc.size;
  s.senderTag &= ~kDescBit;
  *finished = true;
  return Status::Ok;
}

Status CommBase::testRequest(UcxRequest* r, bool* done, int* sizes) {
  *done = false;
  if (failed_) return Status::RemoteError;
  worker_->progress();
  if (fastPath_) ICN_CHECK(startArrivedPulls());
  bool all = true;
  for (int i = 0; i < r->n; i++) {
    SubRequest& s = r->sub[i];
    if (!s.done) {
      all = false;
      continue;
    }
    if (s.status == UCS_OK && (s.senderTag & kDescBit)) {
      bool finished = false;
      Status st = advanceFast(r, i, &finished);
      if (st != Status::Ok) {
        failed_ = true;
        return st;
      }
      all = all && finished;
    }
  }
  if (r->fastSend && all && !__atomic_load_n(&r->fastDone, __ATOMIC_ACQUIRE)) all = false;
  if (!all) return checkPeer(r);
  Status result = Status::Ok;
  uint64_t bytes = 0;
  for (int i = 0; i < r->n; i++) {
    SubRequest& s = r->sub[i];
    if (s.status != UCS_OK) {
      ICN_WARN(subsys::Net, "UCX transfer with %s failed (tag %d, %zu bytes posted): %s", peer().c_str(), r->tags[i],
               r->posted[i], statusString(s.status));
      result = Status::RemoteError;
    }
    if (sizes) sizes[i] = static_cast<int>(s.length);
    bytes += s.length;
    if (s.ucxReq) ucp_request_free(s.ucxReq);
    s.reset();
  }
  counters_->add(bytes);
  *done = true;
  r->active = false;
  releaseRequest(r);
  return result;
}

UcxSendComm::~UcxSendComm() { cancelAll(pool_); }

Status UcxSendComm::isend(void* data, size_t size, int tag, void* mhandle, Request** request) {
  *request = nullptr;
  if (ep_->failed() || failed_) {
    ICN_WARN(subsys::Net, "isend to %s: connection failed earlier: %s", peer().c_str(),
             ep_->failed() ? statusString(ep_->failure()) : "peer is gone");
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
  const void* payload = data;
  size_t wireBytes = size;
  ucp_tag_t t = wireTag(tag);
  r->fastSend = fastPath_ && size >= fastMin_ &&
                memType(mhandle) == UCS_MEMORY_TYPE_HOST;
  if (r->fastSend) {
    r->fastDone = 0;
    r->desc = FastDescriptor{kDescMagic, reinterpret_cast<uint64_t>(data), size,
                             reinterpret_cast<uint64_t>(&r->fastDone), static_cast<int64_t>(getpid())};
    payload = &r->desc;
    wireBytes = sizeof r->desc;
    t |= kDescBit;
  }
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.cb.send = onSendDone;
  p.user_data = &s;
  p.memory_type = r->fastSend ? UCS_MEMORY_TYPE_HOST : memType(mhandle);
  ucs_status_ptr_t st = ucp_tag_send_nbx(ep_->get(), payload, wireBytes, t, &p);
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
  *request = r;
  return Status::Ok;
}

UcxRecvComm::~UcxRecvComm() { cancelAll(pool_); }

// NCCL tests its receives oldest first; pulling every descriptor that has already arrived keeps all
// pipeline slots of a channel copying at once instead of one after the other.
Status UcxRecvComm::startArrivedPulls() {
  Status result = Status::Ok;
  while (SubRequest* s = arrivals_.pop()) {
    UcxRequest* r = s->parent;
    // A stale entry (request completed or cancelled since) fails these checks and is skipped.
    if (result != Status::Ok || !r || !r->active || !s->done || s->pulling || s->status != UCS_OK ||
        !(s->senderTag & kDescBit))
      continue;
    bool finished;
    result = advanceFast(r, s->index, &finished);
  }
  if (result != Status::Ok) failed_ = true;
  return result;
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
  r->fastSend = false;
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
    s.arrivals = fastPath_ ? &arrivals_ : nullptr;
    s.parent = r;
    s.index = i;
    p.memory_type = memType(mhandles ? mhandles[i] : nullptr);
    // Mask out kDescBit: a fast-path descriptor for this tag matches the same receive, in order.
    ucs_status_ptr_t st = ucp_tag_recv_nbx(worker_->get(), data[i], sizes[i], wireTag(tags[i]), ~kDescBit, &p);
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
  *request = r;
  return Status::Ok;
}

}  // namespace icn::ucx
