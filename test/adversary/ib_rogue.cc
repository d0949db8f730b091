#include "ib_rogue.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/handshake.h"
#include "core/oob.h"

namespace icn::adversary {
namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kFifoBytes = sizeof(ib::CtsSlot) * ib::kFifoSlots;
constexpr int kRecvs = 16;  // receive WRs for write-with-immediate, reposted as they complete
}  // namespace

IbRogue::~IbRogue() {
  closeAll();
  for (ibv_mr* m : {bufMr_, fifoMr_, landMr_})
    if (m) ibv_dereg_mr(m);
  if (cq_) ibv_destroy_cq(cq_);
  if (rcq_) ibv_destroy_cq(rcq_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
  free(fifo_);
  free(buf_);
  free(land_);
}

void IbRogue::closeAll() {
  if (qp_) ibv_destroy_qp(qp_);
  qp_ = nullptr;
  control_.reset();
}

bool IbRogue::open(const std::string& dev, std::string* why) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n && !ctx_; i++)
    if (dev == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  if (!ctx_) {
    *why = "cannot open verbs device " + dev;
    return false;
  }
  ibv_port_attr pa{};
  ibv_gid gid{};
  if (ibv_query_port(ctx_, 1, &pa) != 0 || ibv_query_gid(ctx_, 1, 0, &gid) != 0) {
    *why = "cannot query port 1 / GID 0 of " + dev;
    return false;
  }
  memcpy(me_.gid.data(), gid.raw, 16);
  me_.lid = pa.lid;
  me_.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  me_.mtu = uint8_t(pa.active_mtu);
  pd_ = ibv_alloc_pd(ctx_);
  cq_ = pd_ ? ibv_create_cq(ctx_, 64, nullptr, nullptr, 0) : nullptr;
  rcq_ = pd_ ? ibv_create_cq(ctx_, 64, nullptr, nullptr, 0) : nullptr;
  fifo_ = static_cast<uint8_t*>(aligned_alloc(4096, kFifoBytes));
  buf_ = static_cast<uint8_t*>(aligned_alloc(4096, kBufferBytes));
  land_ = static_cast<uint8_t*>(aligned_alloc(4096, kBufferBytes));
  if (!cq_ || !rcq_ || !fifo_ || !buf_ || !land_) {
    *why = "cannot allocate verbs resources";
    return false;
  }
  memset(fifo_, 0, kFifoBytes);
  memset(buf_, 0x77, kBufferBytes);
  memset(land_, 0, kBufferBytes);
  fifoMr_ = ibv_reg_mr(pd_, fifo_, kFifoBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  bufMr_ = ibv_reg_mr(pd_, buf_, kBufferBytes, IBV_ACCESS_LOCAL_WRITE);
  landMr_ = ibv_reg_mr(pd_, land_, kBufferBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_qp_init_attr ia{};
  ia.send_cq = cq_;
  ia.recv_cq = rcq_;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = kRecvs;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  qp_ = fifoMr_ && bufMr_ && landMr_ ? ibv_create_qp(pd_, &ia) : nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (!qp_ || ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    *why = "cannot create an RC QP on " + dev;
    return false;
  }
  for (int i = 0; i < kRecvs; i++) {
    ibv_recv_wr wr{}, *bad = nullptr;
    if (ibv_post_recv(qp_, &wr, &bad) != 0) {
      *why = "ibv_post_recv failed";
      return false;
    }
  }
  return true;
}

ib::ConnBlob IbRogue::localBlob() const {
  ib::ConnBlob blob;
  blob.devs = {me_};
  blob.qpns = {qp_->qp_num};
  blob.fifoAddr = reinterpret_cast<uint64_t>(fifo_);
  blob.fifoRkeys[0] = fifoMr_->rkey;
  return blob;
}

bool IbRogue::connectQp(const ib::ConnBlob& victim, std::string* why) {
  if (victim.qpns.size() != 1) {
    *why = "the victim uses " + std::to_string(victim.qpns.size()) + " QPs (set ICN_IB_QPS_PER_CONNECTION=1)";
    return false;
  }
  victim_ = victim;
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = ibv_mtu(std::min<int>(me_.mtu, victim.devs[0].mtu));
  rtr.dest_qp_num = victim.qpns[0];
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.port_num = 1;
  rtr.ah_attr.is_global = me_.ethernet;
  memcpy(rtr.ah_attr.grh.dgid.raw, victim.devs[0].gid.data(), 16);
  rtr.ah_attr.grh.hop_limit = 255;
  rtr.ah_attr.dlid = victim.devs[0].lid;
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 14;
  rts.retry_cnt = 7;
  rts.rnr_retry = 7;
  rts.max_rd_atomic = 1;
  if (ibv_modify_qp(qp_, &rtr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) ||
      ibv_modify_qp(qp_, &rts,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC)) {
    *why = "cannot connect the QP to the victim's";
    return false;
  }
  return true;
}

std::unique_ptr<IbRogue> IbRogue::connect(const SockAddr& to, uint64_t commId, const std::string& dev, Ms limit,
                                          std::string* why) {
  std::unique_ptr<IbRogue> r(new IbRogue());
  if (!r->open(dev, why)) return nullptr;
  WirePeer tcp(to);
  if (!tcp.ok()) {
    *why = "cannot connect to the listener";
    return nullptr;
  }
  Handshake hs(Fd(::dup(tcp.fd())), Handshake::Role::Connector, "victim",
               connectorHello(commId, ib::encodeBlob(r->localBlob())));
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
      if (ib::decodeBlob(hs.peer().blob, &victim, why) != Status::Ok || !r->connectQp(victim, why)) return nullptr;
      connected = true;
      hs.confirm();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *why = "handshake did not finish in time";
  return nullptr;
}

std::unique_ptr<IbRogue> IbRogue::listen(const std::string& dev, HandleBytes handle, std::string* why) {
  std::unique_ptr<IbRogue> r(new IbRogue());
  if (!r->open(dev, why)) return nullptr;
  SockAddr addr;
  std::string ifname;
  if (pickInterface(&addr, &ifname) != Status::Ok || listenOn(addr, &r->listener_, &r->bound_) != Status::Ok ||
      writeListenHandle(handle, kTransportIb, r->bound_) != Status::Ok) {
    *why = "cannot listen";
    return nullptr;
  }
  return r;
}

bool IbRogue::accept(uint64_t commId, Ms limit, std::string* why) {
  auto deadline = Clock::now() + limit;
  pollfd p{listener_.get(), POLLIN, 0};
  if (::poll(&p, 1, int(limit.count())) != 1) {
    *why = "nobody connected";
    return false;
  }
  Fd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!conn.valid()) {
    *why = "accept failed";
    return false;
  }
  Handshake hs(std::move(conn), Handshake::Role::Acceptor, "victim", connectorHello(commId, {}));
  bool confirmed = false;
  while (Clock::now() < deadline) {
    Handshake::Phase phase;
    if (hs.progress(&phase) != Status::Ok) {
      *why = "handshake failed";
      return false;
    }
    if (phase == Handshake::Phase::Done) {
      control_ = hs.takeFd();
      return true;
    }
    if (phase == Handshake::Phase::PeerKnown && !confirmed) {
      ib::ConnBlob victim;
      if (ib::decodeBlob(hs.peer().blob, &victim, why) != Status::Ok || !connectQp(victim, why)) return false;
      ib::ConnBlob mine = localBlob();
      mine.fifoAddr = 0;  // a receiver has no FIFO
      mine.fifoRkeys = {};
      hs.confirm(ib::encodeBlob(mine));
      confirmed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *why = "handshake did not finish in time";
  return false;
}

bool IbRogue::writeCts(const ib::CtsEntry& e) {
  memcpy(buf_, &e, sizeof e);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf_), sizeof e, bufMr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = victim_.fifoAddr;  // slot 0, entry 0
  wr.wr.rdma.rkey = victim_.fifoRkeys[0];
  bool ok = post(wr) == IBV_WC_SUCCESS;
  memset(buf_, 0x77, sizeof e);
  return ok;
}

uint64_t IbRogue::receivedBytes(uint64_t want, Ms limit) {
  uint64_t& total = received_;
  auto deadline = Clock::now() + limit;
  while (total < want && Clock::now() < deadline) {
    ibv_wc wc{};
    int got = ibv_poll_cq(rcq_, 1, &wc);
    if (got < 0) break;
    if (got == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) break;
    total += wc.byte_len;
    ibv_recv_wr wr{}, *bad = nullptr;
    ibv_post_recv(qp_, &wr, &bad);
  }
  return total;
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
