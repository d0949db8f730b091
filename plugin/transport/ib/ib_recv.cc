// Receive side of the data path: CTS posting, immediate accounting, GPU flush.
#include <arpa/inet.h>

#include <atomic>
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
  remoteFifoRkey_ = peer.fifoRkeys[0];  // CTS goes over QP 0, which pairs with the sender's device 0
  stage_ = allocAligned<CtsSlot>(kFifoSlots);
  if (!stage_) {
    *why = "out of memory for CTS staging";
    return Status::SystemError;
  }
  const Port& p0 = port(0);
  stageMr_.reset(verbsRegMr(p0.hca->pd(), stage_.get(), sizeof(CtsSlot) * kFifoSlots, IBV_ACCESS_LOCAL_WRITE));
  if (!stageMr_) {
    *why = "ibv_reg_mr(CTS staging) on " + p0.hca->name() + ": " + errnoString(errno);
    return Status::SystemError;
  }
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
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(st);
  sge.length = uint32_t(sizeof(CtsEntry) * n);
  sge.lkey = stageMr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = kCtsWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  // Only every 16th CTS is signalled: its completion retires the unsignalled ones before it (at most
  // kFifoSlots CTS writes are outstanding, far below the send queue depth).
  wr.send_flags = (seq_ % 16 == 15) ? IBV_SEND_SIGNALED : 0;
  if (int(sge.length) <= qp0Inline_) wr.send_flags |= IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = remoteFifo_ + uint64_t(slot) * sizeof(CtsSlot);
  wr.wr.rdma.rkey = remoteFifoRkey_;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qps_[0].get(), &wr, &bad); rc != 0) {
    release(&r);
    return fail(Status::SystemError, "ibv_post_send (CTS): " + errnoString(rc));
  }
  if (wr.send_flags & IBV_SEND_SIGNALED) notePosted(0);
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

Status IbRecvComm::onCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kCtsWrId) return Status::Ok;
  if (wc.wr_id & kRecvWrTag) {
    const int qp = int(wc.wr_id & ~kRecvWrTag);
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) return fail(Status::RemoteError, "unexpected receive without immediate");
    const Imm im = decodeImm(ntohl(wc.imm_data));
    IbRequest* rp = slotReq_[im.slot];
    if (!rp || (rp->seq & kImmSeqMask) != im.seq || int(im.sub) >= rp->n) {
      return fail(Status::RemoteError, "write-with-immediate for slot " + std::to_string(im.slot) + " seq " +
                                           std::to_string(im.seq) + " that no receive is waiting for");
    }
    IbRequest& r = *rp;
    // The NIC wrote where the sender aimed, inside our registration; what it may not do is exceed the receive.
    if (r.bytes[im.sub] + wc.byte_len > r.posted[im.sub] || r.chunks[im.sub] >= im.nchunks) {
      return fail(Status::RemoteError, "peer wrote " + std::to_string(r.bytes[im.sub] + wc.byte_len) + " bytes in " +
                                           std::to_string(r.chunks[im.sub] + 1) + " chunk(s) (" +
                                           std::to_string(im.nchunks) + " announced) into a receive of " +
                                           std::to_string(r.posted[im.sub]) + " bytes (tag " +
                                           std::to_string(r.tags[im.sub]) + ")");
    }
    r.bytes[im.sub] += wc.byte_len;
    diagnoseStarted(&r);
    if (++r.chunks[im.sub] == im.nchunks && ++r.subsDone == r.n) slotReq_[im.slot] = nullptr;
    if (postRecvs(qp, 1) != Status::Ok) return fail(Status::SystemError, "ibv_post_recv: " + errnoString(errno));
    return Status::Ok;
  }
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

void IbRecvComm::release(IbRequest* r) {
  releaseTemps(r);
  r->inUse = false;
  if (r->kind == IbRequest::Kind::Flush) flushPool_.release(r);
  else pool_.release(r);
}

}  // namespace icn::ib
