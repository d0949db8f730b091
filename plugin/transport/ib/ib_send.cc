// Send side of the data path: sends queue until the receiver's clear-to-send entry with their tag is in the
// FIFO, then go out as RDMA writes with immediate, split across the connection's QPs.
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>

#include "core/coarse_clock.h"
#include "core/log.h"
#include "transport/ib/ib_comm.h"

namespace icn::ib {

IbSendComm::~IbSendComm() = default;

Status IbSendComm::init(int nqps, std::string* why) {
  ICN_CHECK(createQps(nqps, why));
  fifo_ = allocAligned<CtsSlot>(kFifoSlots);
  if (!fifo_) {
    *why = "out of memory for the CTS FIFO";
    return Status::SystemError;
  }
  for (const Port* p : ports_) {
    MrPtr mr(verbsRegMr(p->hca->pd(), fifo_.get(), sizeof(CtsSlot) * kFifoSlots,
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
  auto* mh = static_cast<MemHandle*>(mhandle);
  if (size > 0 && !data) {
    ICN_WARN(subsys::Net, "isend to %s: %zu bytes from a null buffer", peer().c_str(), size);
    return Status::InvalidArgument;
  }
  if (mh && mh->n != members()) {
    ICN_WARN(subsys::Net, "isend to %s: memory handle registered on another device", peer().c_str());
    return Status::InvalidArgument;
  }
  if (failed_ != Status::Ok) return failed_;
  IbRequest* r = pool_.acquire();
  if (!r) return Status::Ok;  // every request in flight: NCCL retries
  *r = IbRequest{};
  r->owner = this;
  r->kind = IbRequest::Kind::Send;
  r->inUse = true;
  r->bytes[0] = size;
  r->tags[0] = tag;
  r->data = data;
  r->mh = mh;
  if (size > 0 && !mh) {
    if (Status st = tempHandle(r, data, size, &r->mh); st != Status::Ok) {
      release(r);
      return st;
    }
  }
  r->pending = 1;  // until posted; then one per chunk
  diagnosePosted(r, tag, size, /*send=*/true);
  queue_[queued_++] = r;
  if (counters_) counters_->add(size);
  *request = r;
  Status st = progress();
  if (st != Status::Ok) {
    if (monitor()) monitor()->abandon(r->op);
    *request = nullptr;  // the comm failed; the request dies with it
  }
  return st;
}

Status IbSendComm::progress() {
  if (deadLinks_) ICN_CHECK(maybeRejoin());
  while (queued_ > 0) {
    if (failed_ != Status::Ok) return failed_;
    const uint32_t slot = uint32_t(seq_ % kFifoSlots);
    const CtsEntry* e = fifo_.get()[slot].data();
    const uint32_t want = uint32_t(seq_ + 1);
    if (loadSeq(e[0]) != want) return Status::Ok;  // the receiver has not posted this slot yet
    const int nreqs = int(e[0].nreqs);
    if (nreqs < 1 || nreqs > kMaxRecvs)
      return fail(Status::RemoteError, "CTS entry with " + std::to_string(nreqs) + " receives");
    for (int i = 1; i < nreqs; ++i)
      if (loadSeq(e[i]) != want) return Status::Ok;  // rest of the slot still landing
    bool advanced = false;
    for (int k = 0; k < queued_ && !advanced; ++k) {
      IbRequest* r = queue_[k];
      int idx = -1;
      for (int i = 0; i < nreqs && idx < 0; ++i)
        if (!(usedMask_ & (1u << i)) && e[i].tag == r->tags[0]) idx = i;
      if (idx < 0) continue;  // belongs to a later receive
      ICN_CHECK(post(r, e[idx], slot, idx));
      memmove(&queue_[k], &queue_[k + 1], sizeof(queue_[0]) * size_t(queued_ - k - 1));
      --queued_;
      --k;
      usedMask_ |= 1u << idx;
      if (std::popcount(usedMask_) == nreqs) {
        ++seq_;
        usedMask_ = 0;
        advanced = true;
      }
    }
    if (!advanced) return Status::Ok;  // remaining sends wait for receives with their tags
  }
  return Status::Ok;
}

namespace {
// A chunk's work request names its request (pool index) and chunk: completions arrive per chunk, and after a
// failover a chunk may be on another QP than its index.
constexpr uint64_t kChunkWrTag = 1ull << 62;
uint64_t chunkWrId(size_t index, int chunk) { return kChunkWrTag | uint64_t(index) << 4 | uint64_t(chunk); }
}  // namespace

IbRequest* IbSendComm::requestOf(uint64_t wrId, int* chunk) {
  if (!(wrId & kChunkWrTag) || (wrId & kRecvWrTag)) return nullptr;
  const uint64_t index = (wrId & ~kChunkWrTag) >> 4;
  if (index >= pool_.capacity()) return nullptr;
  *chunk = int(wrId & 15);
  IbRequest* r = &pool_.at(index);
  return r->inUse && r->pending > 0 ? r : nullptr;
}

Status IbSendComm::post(IbRequest* r, const CtsEntry& cts, uint32_t slot, int sub) {
  const uint64_t size = r->bytes[0];
  if (size > cts.size) {
    return fail(Status::InvalidUsage, "isend of " + std::to_string(size) + " bytes (tag " + std::to_string(r->tags[0]) +
                                          ") exceeds the " + std::to_string(cts.size) + " bytes the receiver posted");
  }
  diagnoseStarted(r);  // its receiver's clear-to-send is here
  int live[kMaxQps], nlive = 0;
  for (int q = 0; q < qpCount(); ++q)
    if (qpLive(q)) live[nlive++] = q;
  uint64_t off[kMaxQps], len[kMaxQps];
  r->ways = uint8_t(nlive);
  r->nchunks = uint8_t(splitMessage(size, nlive, off, len));
  r->slot = slot;
  r->sub = uint8_t(sub);
  r->seq = uint32_t(seq_);
  r->remoteAddr = cts.addr;
  memcpy(r->ctsRkeys, cts.rkeys, sizeof r->ctsRkeys);
  r->open = uint16_t((1u << r->nchunks) - 1);
  r->sent = true;
  r->pending = 0;
  for (int c = 0; c < r->nchunks; ++c) ICN_CHECK(postChunk(r, c, live[c]));
  return Status::Ok;
}

// Posts chunk `chunk` of a posted send on QP `qp` (its first time, or a resend after a failover).
Status IbSendComm::postChunk(IbRequest* r, int chunk, int qp) {
  uint64_t off[kMaxQps], len[kMaxQps];
  splitMessage(r->bytes[0], r->ways, off, len);
  const int dev = qp % members(), peerDev = qp % peerMembers_;
  ibv_sge sge{};
  ibv_send_wr wr{};
  if (len[chunk] > 0) {
    sge.addr = reinterpret_cast<uint64_t>(r->data) + off[chunk];
    sge.length = uint32_t(len[chunk]);
    sge.lkey = r->mh->entries[dev]->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  wr.wr_id = chunkWrId(pool_.indexOf(r), chunk);
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(encodeImm({r->slot, r->sub, r->nchunks, r->seq & kImmSeqMask, uint32_t(chunk)}));
  wr.wr.rdma.remote_addr = r->remoteAddr + off[chunk];
  wr.wr.rdma.rkey = r->ctsRkeys[peerDev];
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qps_[qp].get(), &wr, &bad); rc != 0)
    return fail(Status::SystemError, "ibv_post_send (write with immediate): " + errnoString(rc));
  notePosted(qp);
  if (RailCounters* c = linkCounter(linkOf(qp))) c->bytes.fetch_add(len[chunk], std::memory_order_relaxed);
  r->qpOf[chunk] = uint8_t(qp);
  ++r->pending;
  return Status::Ok;
}

std::string IbSendComm::describeWr(uint64_t wrId) const {
  if (!(wrId & kChunkWrTag) || (wrId & kRecvWrTag)) return "";
  const uint64_t index = (wrId & ~kChunkWrTag) >> 4;
  if (index >= pool_.capacity()) return "";
  const IbRequest& r = pool_.at(index);
  char buf[160];
  snprintf(buf, sizeof buf, " on a send of %llu bytes (tag %d) to 0x%llx rkey 0x%x", (unsigned long long)r.bytes[0],
           r.tags[0], (unsigned long long)r.remoteAddr, r.ctsRkeys[0]);
  return buf;
}

Status IbSendComm::onCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kCtsWrId || (wc.wr_id & kRecvWrTag)) return Status::Ok;
  int chunk = 0;
  IbRequest* r = requestOf(wc.wr_id, &chunk);
  if (!r) return fail(Status::InternalError, "completion for an unknown send request");
  --r->pending;
  r->open &= uint16_t(~(1u << chunk));  // the receiver's NIC has it
  r->lost &= uint16_t(~(1u << chunk));
  return Status::Ok;
}

Status IbSendComm::onFailedCompletion(const ibv_wc& wc) {
  int chunk = 0;
  IbRequest* r = requestOf(wc.wr_id, &chunk);
  if (!r) return fail(Status::InternalError, "failed completion for an unknown send request");
  --r->pending;  // the chunk stays open: the receiver's report decides whether it goes again
  return Status::Ok;
}

void IbSendComm::release(IbRequest* r) {
  releaseTemps(r);
  r->inUse = false;
  pool_.release(r);
}

}  // namespace icn::ib
