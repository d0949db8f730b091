// Receive side of the data path: CTS posting, immediate accounting, GPU flush.
#include <arpa/inet.h>

#include <atomic>
#include <bit>
#include <cerrno>

#include "core/log.h"
#include "core/params.h"
#include "transport/ib/ib_comm.h"

namespace icn::ib {
namespace {
std::atomic<bool> gFlushHostForTesting{false};
}  // namespace

void setFlushHostMemoryForTesting(bool on) { gFlushHostForTesting = on; }
bool flushHostMemoryForTesting() { return gFlushHostForTesting.load(); }

IbRecvComm::~IbRecvComm() { flushQp_.reset(); }

Status IbRecvComm::init(const ConnBlob& peer, const QpTuning& t, std::string* why) {
  ICN_CHECK(createQps(int(peer.qpns.size()), why));
  ICN_CHECK(connectQps(peer, t, why));
  remoteFifo_ = peer.fifoAddr;
  remoteFifoRkeys_ = peer.fifoRkeys;  // CTS goes over QP 0 (the sender's device 0) until that link dies
  peerMembers_ = int(peer.devs.size());
  stage_ = allocAligned<CtsSlot>(kFifoSlots);
  if (!stage_) {
    *why = "out of memory for CTS staging";
    return Status::SystemError;
  }
  for (const Port* p : ports_) {
    MrPtr mr(verbsRegMr(p->hca->pd(), stage_.get(), sizeof(CtsSlot) * kFifoSlots, IBV_ACCESS_LOCAL_WRITE));
    if (!mr) {
      *why = "ibv_reg_mr(CTS staging) on " + p->hca->name() + ": " + errnoString(errno);
      return Status::SystemError;
    }
    stageMrs_.push_back(std::move(mr));
  }
  const Port& p0 = port(0);
  flushAll_ = gFlushHostForTesting.load();
  const bool gdrFlush = p0.hca->gdr.mode != GdrMode::None && !params::getBool(params::Id::GdrFlushDisable);
  if (gdrFlush || flushAll_) {
    ICN_CHECK(createRcQp(p0, cqs_[0].get(), kMaxRequests + 4, 1, &sink_, &flushQp_, why, 0, nullptr, QpUse::Flush));
    ICN_CHECK(connectQp(flushQp_.get(), p0, localAddr(p0), flushQp_->qp_num, t, why));
    flushBuf_ = allocAligned<uint8_t>(64);
    flushMr_.reset(verbsRegMr(p0.hca->pd(), flushBuf_.get(), 64, IBV_ACCESS_LOCAL_WRITE));
    if (!flushMr_) {
      *why = "ibv_reg_mr(flush buffer): " + errnoString(errno);
      return Status::SystemError;
    }
  }
  return Status::Ok;
}

ConnBlob IbRecvComm::localBlob() const {
  ConnBlob b;
  b.devs = localAddrs();
  b.qpns = qpNumbers();
  return b;
}

Status IbRecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                         Request** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs || !data || !sizes || !tags) {
    ICN_WARN(subsys::Net, "irecv from %s: bad arguments (n=%d, at most %d grouped receives)", peer().c_str(), n,
             kMaxRecvs);
    return Status::InvalidArgument;
  }
  if (failed_ != Status::Ok) return failed_;
  if (links_ > 1) ICN_CHECK(serviceControl());  // a fence may come while no receive is waiting
  const uint32_t slot = uint32_t(seq_ % kFifoSlots);
  // The receive 32 back still has data landing in this slot (possible with several QPs): NCCL retries.
  if (slotReq_[slot]) return checkHealth(slotReq_[slot]);
  for (int i = 0; i < n; ++i) {
    auto* mh = mhandles ? static_cast<MemHandle*>(mhandles[i]) : nullptr;
    if ((sizes[i] > 0 && !data[i]) || (mh && mh->n != members())) {
      ICN_WARN(subsys::Net, "irecv from %s: receive %d: null buffer or a memory handle of another device",
               peer().c_str(), i);
      return Status::InvalidArgument;
    }
  }
  IbRequest* rp = pool_.acquire();
  if (!rp) {
    ICN_WARN(subsys::Net, "irecv from %s: more than %d requests in flight", peer().c_str(), kMaxRequests);
    return Status::InvalidUsage;
  }
  IbRequest& r = *rp;
  r = IbRequest{};
  r.owner = this;
  r.kind = IbRequest::Kind::Recv;
  CtsEntry* st = stage_.get()[slot].data();
  for (int i = 0; i < n; ++i) {
    auto* mh = mhandles ? static_cast<MemHandle*>(mhandles[i]) : nullptr;
    if (sizes[i] > 0 && !mh) {
      if (Status s = tempHandle(&r, data[i], sizes[i], &mh); s != Status::Ok) {
        release(&r);
        return s;
      }
    }
    CtsEntry& e = st[i];
    e = CtsEntry{};
    e.addr = reinterpret_cast<uint64_t>(data[i]);
    for (int d = 0; mh && d < mh->n; ++d) e.rkeys[d] = mh->entries[d]->rkey;
    e.size = sizes[i];
    e.tag = tags[i];
    e.nreqs = uint32_t(n);
    e.seq = uint32_t(seq_ + 1);
  }
  // Only every 16th CTS is signalled: its completion retires the unsignalled ones before it (at most
  // kFifoSlots CTS writes are outstanding, far below the send queue depth).
  if (Status s = postCts(slot, n, seq_ % 16 == 15); s != Status::Ok) {
    release(&r);
    return s;
  }
  slotReq_[slot] = &r;
  r.inUse = true;
  r.n = n;
  r.seq = uint32_t(seq_);
  uint64_t postedBytes = 0;
  for (int i = 0; i < n; ++i) {
    r.tags[i] = tags[i];
    r.posted[i] = sizes[i];
    postedBytes += sizes[i];
  }
  diagnosePosted(&r, tags[0], postedBytes, /*send=*/false);  // grouped receives as one: first tag, summed sizes
  ++seq_;
  *request = &r;
  return Status::Ok;
}

Status IbRecvComm::postCts(uint32_t slot, int n, bool signalled) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(stage_.get()[slot].data());
  sge.length = uint32_t(sizeof(CtsEntry) * n);
  sge.lkey = stageMrs_[ctsQp_ % members()]->lkey;
  ibv_send_wr wr{};
  wr.wr_id = kCtsWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = signalled ? IBV_SEND_SIGNALED : 0;
  if (ctsQp_ == 0 && int(sge.length) <= qp0Inline_) wr.send_flags |= IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = remoteFifo_ + uint64_t(slot) * sizeof(CtsSlot);
  wr.wr.rdma.rkey = remoteFifoRkeys_[ctsQp_ % peerMembers_];
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qps_[ctsQp_].get(), &wr, &bad); rc != 0)
    return fail(Status::SystemError, "ibv_post_send (CTS): " + errnoString(rc));
  if (signalled) notePosted(ctsQp_);
  return Status::Ok;
}

Status IbRecvComm::onChunk(const ibv_wc& wc) {
  const int qp = int(wc.wr_id & ~kRecvWrTag);
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) return fail(Status::RemoteError, "unexpected receive without immediate");
  const Imm im = decodeImm(ntohl(wc.imm_data));
  IbRequest* rp = slotReq_[im.slot];
  if (!rp || (rp->seq & kImmSeqMask) != im.seq || int(im.sub) >= rp->n) {
    return fail(Status::RemoteError, "write-with-immediate for slot " + std::to_string(im.slot) + " seq " +
                                         std::to_string(im.seq) + " that no receive is waiting for");
  }
  IbRequest& r = *rp;
  const int sub = int(im.sub);
  // The NIC wrote where the sender aimed, inside our registration; what it may not do is exceed the receive.
  const int arrived = std::popcount(r.have[sub]);
  if (r.bytes[sub] + wc.byte_len > r.posted[sub] || arrived >= int(im.nchunks)) {
    return fail(Status::RemoteError, "peer wrote " + std::to_string(r.bytes[sub] + wc.byte_len) + " bytes in " +
                                         std::to_string(arrived + 1) + " chunk(s) (" +
                                         std::to_string(im.nchunks) + " announced) into a receive of " +
                                         std::to_string(r.posted[sub]) + " bytes (tag " + std::to_string(r.tags[sub]) +
                                         ")");
  }
  if (im.chunk >= im.nchunks || (r.expect[sub] && r.expect[sub] != im.nchunks) || (r.have[sub] & (1u << im.chunk))) {
    return fail(Status::RemoteError, "chunk " + std::to_string(im.chunk) + " of " + std::to_string(im.nchunks) +
                                         " (tag " + std::to_string(r.tags[sub]) + ") is out of range, repeated, or " +
                                         "announced with another count than its siblings");
  }
  r.expect[sub] = uint8_t(im.nchunks);
  r.have[sub] |= uint16_t(1u << im.chunk);
  r.bytes[sub] += wc.byte_len;
  diagnoseStarted(&r);
  if (arrived + 1 == int(im.nchunks) && ++r.subsDone == r.n) slotReq_[im.slot] = nullptr;
  // Landed before its link died (nothing more comes through that QP; after a re-admission the index names a new one).
  if (!qpLive(qp) || qps_[qp]->qp_num != wc.qp_num) return Status::Ok;
  if (postRecvs(qp, 1) != Status::Ok) return fail(Status::SystemError, "ibv_post_recv: " + errnoString(errno));
  return Status::Ok;
}

Status IbRecvComm::onCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kCtsWrId) return Status::Ok;
  if (wc.wr_id & kRecvWrTag) return onChunk(wc);
  auto* r = reinterpret_cast<IbRequest*>(wc.wr_id);
  if (!flushPool_.owns(r) || r->pending <= 0) return fail(Status::InternalError, "completion for an unknown request");
  --r->pending;
  return Status::Ok;
}

Status IbRecvComm::iflush(int n, void** data, const int* sizes, void** mhandles, Request** request) {
  *request = nullptr;
  if (!flushQp_ || !mhandles || !data || !sizes) return Status::Ok;
  int last = -1;
  for (int i = 0; i < n; ++i) {
    auto* mh = static_cast<MemHandle*>(mhandles[i]);
    if (sizes[i] > 0 && mh && (flushAll_ || (mh->type == kMemCuda && port(0).hca->gdr.mode != GdrMode::None)))
      last = i;
  }
  if (last < 0) return Status::Ok;  // nothing landed in GPU memory
  if (failed_ != Status::Ok) return failed_;
  IbRequest* r = flushPool_.acquire();
  if (!r) {
    ICN_WARN(subsys::Net, "iflush from %s: more than %d flushes in flight", peer().c_str(), kMaxRequests);
    return Status::InvalidUsage;
  }
  *r = IbRequest{};
  r->owner = this;
  r->kind = IbRequest::Kind::Flush;
  r->inUse = true;
  r->n = 1;
  auto* mh = static_cast<MemHandle*>(mhandles[last]);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(flushBuf_.get());
  sge.length = 1;
  sge.lkey = flushMr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uint64_t>(r);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(data[last]);
  wr.wr.rdma.rkey = mh->entries[0]->rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(flushQp_.get(), &wr, &bad); rc != 0) {
    release(r);
    return fail(Status::SystemError, "ibv_post_send (flush read): " + errnoString(rc));
  }
  r->pending = 1;
  *request = r;
  return Status::Ok;
}

// Receives and CTS writes flushed from a dead link's QPs: the sender resends what the report says is missing,
// and the pending slots' CTS entries go again over the new CTS QP.
Status IbRecvComm::onFailedCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kCtsWrId || (wc.wr_id & kRecvWrTag)) return Status::Ok;
  return fail(Status::RemoteError, std::string("flush read failed: ") + verbs().wc_status_str(wc.status));
}

void IbRecvComm::release(IbRequest* r) {
  releaseTemps(r);
  r->inUse = false;
  if (r->kind == IbRequest::Kind::Flush) flushPool_.release(r);
  else pool_.release(r);
}

}  // namespace icn::ib
