// CommBase (QPs, CQ polling, health, memory registration) and the send side of the data path.
#include <arpa/inet.h>

#include <atomic>
#include <bit>
#include <cerrno>

#include "core/log.h"
#include "core/params.h"
#include "transport/ib/ib_comm.h"

namespace icn::ib {
namespace {
// A peer that closed its control socket may still have completions for us in flight: keep polling this long
// before turning "peer gone" into an error.
constexpr auto kPeerGoneGrace = std::chrono::milliseconds(300);
}  // namespace

Status IbRequest::test(bool* done, int* sizes) { return owner->testRequest(this, done, sizes); }

CommBase::CommBase(std::vector<const Port*> ports, bool isSend) : ports_(std::move(ports)), isSend_(isSend) {}

CommBase::~CommBase() {
  qps_.clear();  // QPs before their CQs
  cqs_.clear();
  if (counters_) netstats::unregisterComm(counters_);
}

std::vector<DevAddr> CommBase::localAddrs() const {
  std::vector<DevAddr> v;
  for (const Port* p : ports_) v.push_back(localAddr(*p));
  return v;
}

std::vector<uint32_t> CommBase::qpNumbers() const {
  std::vector<uint32_t> v;
  for (const auto& q : qps_) v.push_back(q->qp_num);
  return v;
}

Status CommBase::createQps(int nqps, std::string* why) {
  const int m = members();
  for (int d = 0; d < m; ++d) {
    int onDev = (nqps - d + m - 1) / m;
    // Sends: one WR per chunk per sub-request; receives: one per immediate; plus CTS writes and flush reads.
    int depth = onDev * 2 * kQueueDepth + 2 * kMaxRequests + 16;
    CqPtr cq(ibv_create_cq(ports_[d]->hca->ctx(), depth, nullptr, nullptr, 0));
    if (!cq) {
      *why = "ibv_create_cq(" + std::to_string(depth) + ") on " + ports_[d]->hca->name() + ": " + errnoString(errno);
      return Status::SystemError;
    }
    cqs_.push_back(std::move(cq));
  }
  for (int i = 0; i < nqps; ++i) {
    QpPtr qp;
    // QP 0 of a receiver carries the CTS writes: inline them when the provider allows (no staging DMA).
    const int wantInline = (!isSend_ && i == 0) ? int(sizeof(CtsSlot)) : 0;
    ICN_CHECK(createRcQp(*ports_[i % m], cqs_[i % m].get(), kQueueDepth + kMaxRequests, kQueueDepth, &sink_, &qp, why,
                         wantInline, i == 0 ? &qp0Inline_ : nullptr));
    qps_.push_back(std::move(qp));
    // Receives must be posted before the peer can write with immediate (allowed from INIT).
    if (!isSend_) {
      Status st = postRecvs(i, kQueueDepth);
      if (st != Status::Ok) {
        *why = "ibv_post_recv: " + errnoString(errno);
        return st;
      }
    }
  }
  return Status::Ok;
}

Status CommBase::postRecvs(int qp, int count) {
  ibv_recv_wr wrs[16];
  while (count > 0) {
    int k = count < 16 ? count : 16;
    for (int j = 0; j < k; ++j) {
      wrs[j] = {};
      wrs[j].wr_id = kRecvWrTag | uint64_t(qp);
      wrs[j].next = j + 1 < k ? &wrs[j + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(qps_[qp].get(), wrs, &bad) != 0) return Status::SystemError;
    count -= k;
  }
  return Status::Ok;
}

Status CommBase::connectQps(const ConnBlob& peer, const QpTuning& t, std::string* why) {
  if (peer.qpns.size() != qps_.size()) {
    *why = "peer has " + std::to_string(peer.qpns.size()) + " QPs, we have " + std::to_string(qps_.size());
    return Status::RemoteError;
  }
  for (size_t i = 0; i < qps_.size(); ++i) {
    const Port& local = *ports_[i % ports_.size()];
    const DevAddr& remote = peer.devs[i % peer.devs.size()];
    ICN_CHECK(connectQp(qps_[i].get(), local, remote, peer.qpns[i], t, why));
  }
  return Status::Ok;
}

void CommBase::start(ControlChannel control, NetCommInfo info) {
  peerName_ = control.peerName();
  control_ = std::move(control);
  counters_ = netstats::registerComm(info);
}

Status CommBase::fail(Status st, const std::string& why) {
  if (failed_ == Status::Ok) {
    failed_ = st;
    ICN_WARN(subsys::Net, "ib %s connection with %s failed: %s", isSend_ ? "send" : "receive", peerName_.c_str(),
             why.c_str());
  }
  return failed_;
}

Status CommBase::checkHealth(const IbRequest* r) {
  if (failed_ != Status::Ok) return failed_;
  std::string why;
  for (const Port* p : ports_) {
    if (p->healthy(&why) != Status::Ok) return fail(Status::SystemError, why);
  }
  int ev = sink_.event.load(std::memory_order_relaxed);
  if (ev >= 0) return fail(Status::SystemError, std::string("QP fatal event: ") + ibv_event_type_str(ibv_event_type(ev)));
  if (control_.checkAlive() == Status::Ok) return Status::Ok;
  auto now = std::chrono::steady_clock::now();
  if (peerGoneAt_ == std::chrono::steady_clock::time_point{}) peerGoneAt_ = now;
  if (now - peerGoneAt_ < kPeerGoneGrace) return Status::Ok;
  return fail(Status::RemoteError, "peer is gone (control connection closed) with a request (tag " +
                                       std::to_string(r ? r->tags[0] : 0) + ") pending");
}

Status CommBase::poll() {
  if (failed_ != Status::Ok) return failed_;
  ibv_wc wcs[16];
  for (auto& cq : cqs_) {
    for (;;) {
      int n = ibv_poll_cq(cq.get(), 16, wcs);
      if (n < 0) return fail(Status::SystemError, "ibv_poll_cq failed");
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
          char buf[160];
          snprintf(buf, sizeof buf, "completion error: %s (vendor error 0x%x, QP %u)", ibv_wc_status_str(wc.status),
                   wc.vendor_err, wc.qp_num);
          return fail(Status::RemoteError, buf);
        }
        ICN_CHECK(onCompletion(wc));
      }
      if (n < 16) break;
    }
  }
  return Status::Ok;
}

Status CommBase::testRequest(IbRequest* r, bool* done, int* sizes) {
  *done = false;
  if (!r || !r->inUse) return Status::InvalidUsage;
  ICN_CHECK(poll());
  bool complete = r->kind == IbRequest::Kind::Recv ? r->subsDone == r->n : r->pending == 0;
  if (!complete) return checkHealth(r);
  if (sizes) {
    for (int i = 0; i < r->n; ++i) sizes[i] = int(r->bytes[i]);
  }
  if (r->kind == IbRequest::Kind::Recv && counters_) {
    uint64_t total = 0;
    for (int i = 0; i < r->n; ++i) total += r->bytes[i];
    counters_->add(total);
  }
  *done = true;
  release(r);
  return Status::Ok;
}

Status CommBase::regMrImpl(void* data, size_t size, int type, int fd, uint64_t offset, void** mh) {
  if (!mh) return Status::InvalidArgument;
  *mh = nullptr;
  auto h = std::make_unique<MemHandle>();  // registration is per buffer, not per message
  h->type = type;
  for (const Port* p : ports_) {
    Hca& hca = *p->hca;
    if (type == kMemCuda && hca.gdr.mode == GdrMode::None) {
      ICN_WARN(subsys::Net, "regMr: GPU memory on %s but GPUDirect RDMA is unavailable (%s)", hca.name().c_str(),
               hca.gdr.why.c_str());
      deregMrImpl(h.release());
      return Status::InvalidUsage;
    }
    std::string why;
    MrEntry* e = nullptr;
    Status st = hca.mrCache().acquire(data, size, type, fd, offset, &e, &why);
    if (st != Status::Ok) {
      ICN_WARN(subsys::Net, "regMr: %s", why.c_str());
      deregMrImpl(h.release());
      return st;
    }
    h->entries[h->n] = e;
    h->hcas[h->n] = &hca;
    ++h->n;
  }
  *mh = h.release();
  return Status::Ok;
}

Status CommBase::deregMrImpl(void* mh) {
  std::unique_ptr<MemHandle> h(static_cast<MemHandle*>(mh));
  if (!h) return Status::Ok;
  for (int i = 0; i < h->n; ++i) h->hcas[i]->mrCache().release(h->entries[i]);
  return Status::Ok;
}

// ---------------------------------------------------------------- send side

IbSendComm::~IbSendComm() = default;

Status IbSendComm::init(int nqps, std::string* why) {
  ICN_CHECK(createQps(nqps, why));
  fifo_ = allocAligned<CtsSlot>(kFifoSlots);
  if (!fifo_) {
    *why = "out of memory for the CTS FIFO";
    return Status::SystemError;
  }
  for (const Port* p : ports_) {
    MrPtr mr(ibv_reg_mr(p->hca->pd(), fifo_.get(), sizeof(CtsSlot) * kFifoSlots,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    if (!mr) {
      *why = "ibv_reg_mr(CTS FIFO) on " + p->hca->name() + ": " + errnoString(errno);
      return Status::SystemError;
    }
    fifoMrs_.push_back(std::move(mr));
  }
  return Status::Ok;
}

ConnBlob IbSendComm::localBlob() const {
  ConnBlob b;
  b.devs = localAddrs();
  b.qpns = qpNumbers();
  b.fifoAddr = reinterpret_cast<uint64_t>(fifo_.get());
  for (size_t i = 0; i < fifoMrs_.size(); ++i) b.fifoRkeys[i] = fifoMrs_[i]->rkey;
  return b;
}

static uint32_t loadSeq(const CtsEntry& e) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(e.seq)).load(std::memory_order_acquire);
}

Status IbSendComm::isend(void* data, size_t size, int tag, void* mhandle, Request** request) {
  *request = nullptr;
  if (failed_ != Status::Ok) return failed_;
  const uint32_t slot = uint32_t(seq_ % kFifoSlots);
  const CtsEntry* e = fifo_.get()[slot].data();
  const uint32_t want = uint32_t(seq_ + 1);
  if (loadSeq(e[0]) != want) return checkHealth(nullptr);  // receiver has not posted yet: NCCL retries
  const int nreqs = int(e[0].nreqs);
  if (nreqs < 1 || nreqs > kMaxRecvs) return fail(Status::RemoteError, "CTS entry with " + std::to_string(nreqs) + " receives");
  int idx = -1;
  for (int i = 0; i < nreqs; ++i) {
    if (usedMask_ & (1u << i)) continue;
    if (loadSeq(e[i]) != want) return Status::Ok;  // rest of the slot still landing
    if (e[i].tag == tag) { idx = i; break; }
  }
  if (idx < 0) return Status::Ok;  // no receive with this tag in the current group yet
  const CtsEntry& cts = e[idx];
  if (size > cts.size) {
    return fail(Status::InvalidUsage, "isend of " + std::to_string(size) + " bytes (tag " + std::to_string(tag) +
                                          ") exceeds the " + std::to_string(cts.size) + " bytes the receiver posted");
  }
  auto* mh = static_cast<MemHandle*>(mhandle);
  if (size > 0 && (!data || !mh || mh->n != members())) {
    ICN_WARN(subsys::Net, "isend to %s: %zu bytes without a memory handle of this comm", peer().c_str(), size);
    return Status::InvalidArgument;
  }
  IbRequest* r = pool_.acquire();
  if (!r) return Status::Ok;  // all requests in flight: NCCL retries
  *r = IbRequest{};
  r->owner = this;
  r->kind = IbRequest::Kind::Send;
  r->inUse = true;
  r->bytes[0] = size;
  r->tags[0] = tag;

  uint64_t off[kMaxQps], len[kMaxQps];
  const int nchunks = splitMessage(size, qpCount(), off, len);
  const uint32_t imm = htonl(encodeImm({slot, uint32_t(idx), uint32_t(nchunks), uint32_t(seq_ & kImmSeqMask)}));
  for (int c = 0; c < nchunks; ++c) {
    const int dev = c % members(), peerDev = c % peerMembers_;
    ibv_sge sge{};
    ibv_send_wr wr{};
    if (len[c] > 0) {
      sge.addr = reinterpret_cast<uint64_t>(data) + off[c];
      sge.length = uint32_t(len[c]);
      sge.lkey = mh->entries[dev]->lkey;
      wr.sg_list = &sge;
      wr.num_sge = 1;
    }
    wr.wr_id = reinterpret_cast<uint64_t>(r);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = cts.addr + off[c];
    wr.wr.rdma.rkey = cts.rkeys[peerDev];
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qps_[c].get(), &wr, &bad); rc != 0) {
      if (c == 0) release(r);  // nothing posted; otherwise the comm is dead anyway
      return fail(Status::SystemError, "ibv_post_send (write with immediate): " + errnoString(rc));
    }
    ++r->pending;
  }
  usedMask_ |= 1u << idx;
  if (std::popcount(usedMask_) == nreqs) {
    ++seq_;
    usedMask_ = 0;
  }
  if (counters_) counters_->add(size);
  *request = r;
  return Status::Ok;
}

Status IbSendComm::onCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kCtsWrId || (wc.wr_id & kRecvWrTag)) return Status::Ok;
  auto* r = reinterpret_cast<IbRequest*>(wc.wr_id);
  if (!pool_.owns(r) || r->pending <= 0) return fail(Status::InternalError, "completion for an unknown send request");
  --r->pending;
  return Status::Ok;
}

void IbSendComm::release(IbRequest* r) {
  r->inUse = false;
  pool_.release(r);
}

}  // namespace icn::ib
