#include "ib_rogue.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/handshake.h"
#include "transport/ib/ib_wire.h"

namespace icn::adversary {
namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kFifoBytes = sizeof(ib::CtsSlot) * ib::kFifoSlots;
}  // namespace

IbRogue::~IbRogue() {
  closeAll();
  if (bufMr_) ibv_dereg_mr(bufMr_);
  if (fifoMr_) ibv_dereg_mr(fifoMr_);
  if (cq_) ibv_destroy_cq(cq_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
  free(fifo_);
  free(buf_);
}

void IbRogue::closeAll() {
  if (qp_) ibv_destroy_qp(qp_);
  qp_ = nullptr;
  control_.reset();
}

std::unique_ptr<IbRogue> IbRogue::connect(const SockAddr& to, uint64_t commId, const std::string& dev, Ms limit,
                                          std::string* why) {
  std::unique_ptr<IbRogue> r(new IbRogue());
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n && !r->ctx_; i++)
    if (dev == ibv_get_device_name(list[i])) r->ctx_ = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  if (!r->ctx_) {
    *why = "cannot open verbs device " + dev;
    return nullptr;
  }
  ibv_port_attr pa{};
  ibv_gid gid{};
  if (ibv_query_port(r->ctx_, 1, &pa) != 0 || ibv_query_gid(r->ctx_, 1, 0, &gid) != 0) {
    *why = "cannot query port 1 / GID 0 of " + dev;
    return nullptr;
  }
  r->pd_ = ibv_alloc_pd(r->ctx_);
  r->cq_ = r->pd_ ? ibv_create_cq(r->ctx_, 64, nullptr, nullptr, 0) : nullptr;
  r->fifo_ = static_cast<uint8_t*>(aligned_alloc(4096, kFifoBytes));
  r->buf_ = static_cast<uint8_t*>(aligned_alloc(4096, kBufferBytes));
  if (!r->cq_ || !r->fifo_ || !r->buf_) {
    *why = "cannot allocate verbs resources";
    return nullptr;
  }
  memset(r->fifo_, 0, kFifoBytes);
  memset(r->buf_, 0x77, kBufferBytes);
  r->fifoMr_ = ibv_reg_mr(r->pd_, r->fifo_, kFifoBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  r->bufMr_ = ibv_reg_mr(r->pd_, r->buf_, kBufferBytes, IBV_ACCESS_LOCAL_WRITE);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = r->cq_;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  r->qp_ = r->fifoMr_ && r->bufMr_ ? ibv_create_qp(r->pd_, &ia) : nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (!r->qp_ || ibv_modify_qp(r->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    *why = "cannot create an RC QP on " + dev;
    return nullptr;
  }
  ib::DevAddr me;
  memcpy(me.gid.data(), gid.raw, 16);
  me.lid = pa.lid;
  me.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  me.mtu = uint8_t(pa.active_mtu);
  ib::ConnBlob blob;
  blob.devs = {me};
  blob.qpns = {r->qp_->qp_num};
  blob.fifoAddr = reinterpret_cast<uint64_t>(r->fifo_);
  blob.fifoRkeys[0] = r->fifoMr_->rkey;

  WirePeer tcp(to);
  if (!tcp.ok()) {
    *why = "cannot connect to the listener";
    return nullptr;
  }
  Handshake hs(Fd(::dup(tcp.fd())), Handshake::Role::Connector, "victim", connectorHello(commId, ib::encodeBlob(blob)));
  tcp.close();
  bool connected = false;
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    Handshake::Phase phase;
    if (hs.progress(&phase) != Status::Ok) {
      *why = "handshake refused";
      return nullptr;
    }
    if (phase == Handshake::Phase::Done) {
      r->control_ = hs.takeFd();
      return r;
    }
    if (phase == Handshake::Phase::PeerKnown && !connected) {
      ib::ConnBlob victim;
      if (ib::decodeBlob(hs.peer().blob, &victim, why) != Status::Ok || victim.qpns.size() != 1) {
        *why = "the victim's blob: " + *why;
        return nullptr;
      }
      ibv_qp_attr rtr{};
      rtr.qp_state = IBV_QPS_RTR;
      rtr.path_mtu = ibv_mtu(std::min<int>(me.mtu, victim.devs[0].mtu));
      rtr.dest_qp_num = victim.qpns[0];
      rtr.max_dest_rd_atomic = 1;
      rtr.min_rnr_timer = 12;
      rtr.ah_attr.port_num = 1;
      rtr.ah_attr.is_global = me.ethernet;
      memcpy(rtr.ah_attr.grh.dgid.raw, victim.devs[0].gid.data(), 16);
      rtr.ah_attr.grh.hop_limit = 255;
      rtr.ah_attr.dlid = victim.devs[0].lid;
      ibv_qp_attr rts{};
      rts.qp_state = IBV_QPS_RTS;
      rts.timeout = 14;
      rts.retry_cnt = 7;
      rts.rnr_retry = 7;
      rts.max_rd_atomic = 1;
      if (ibv_modify_qp(r->qp_, &rtr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) ||
          ibv_modify_qp(r->qp_, &rts,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                            IBV_QP_MAX_QP_RD_ATOMIC)) {
        *why = "cannot connect the QP to the victim's";
        return nullptr;
      }
      connected = true;
      hs.confirm();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *why = "handshake did not finish in time";
  return nullptr;
}

std::optional<IbRogue::Cts> IbRogue::waitCts(Ms limit) {
  auto* e = reinterpret_cast<ib::CtsEntry*>(fifo_);  // slot 0, entry 0
  auto deadline = Clock::now() + limit;
  while (std::atomic_ref<uint32_t>(e->seq).load(std::memory_order_acquire) == 0) {
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Cts{e->addr, e->rkeys[0], e->size, e->tag, e->seq - 1};
}

ibv_wc_status IbRogue::post(ibv_send_wr& wr) {
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (!qp_ || ibv_post_send(qp_, &wr, &bad) != 0) return IBV_WC_GENERAL_ERR;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  ibv_wc wc{};
  while (Clock::now() < deadline) {
    int got = ibv_poll_cq(cq_, 1, &wc);
    if (got < 0) return IBV_WC_GENERAL_ERR;
    if (got == 1) return wc.status;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return IBV_WC_GENERAL_ERR;
}

ibv_wc_status IbRogue::write(uint64_t remoteAddr, uint32_t rkey, uint32_t len, std::optional<uint32_t> imm) {
  ibv_sge sge{reinterpret_cast<uint64_t>(buf_), std::min<uint32_t>(len, kBufferBytes), bufMr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm) wr.imm_data = htonl(*imm);
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  return post(wr);
}

ibv_wc_status IbRogue::read(uint64_t remoteAddr, uint32_t rkey, uint32_t len) {
  ibv_sge sge{reinterpret_cast<uint64_t>(buf_), std::min<uint32_t>(len, kBufferBytes), bufMr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  return post(wr);
}

ibv_wc_status IbRogue::sendEmpty() {
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  return post(wr);
}

}  // namespace icn::adversary
