#include "transport/ib/ib_qp.h"

#include <algorithm>
#include <cerrno>

#include "core/params.h"

namespace icn::ib {

// The verbs fields' widths: 5-bit ACK timeout exponent (0 is infinite: never), 3-bit retry count, 4-bit SL, 8-bit
// traffic class (-1 is ours for "NCCL's").
static_assert(params::minOf(params::Id::IbTimeout) >= 1 && params::maxOf(params::Id::IbTimeout) <= 31);
static_assert(params::minOf(params::Id::IbRetryCnt) >= 0 && params::maxOf(params::Id::IbRetryCnt) <= 7);
static_assert(params::minOf(params::Id::IbSl) >= 0 && params::maxOf(params::Id::IbSl) <= 15);
static_assert(params::minOf(params::Id::IbTc) >= -1 && params::maxOf(params::Id::IbTc) <= 255);

QpTuning qpTuningFromParams(int commTrafficClass) {
  QpTuning t;
  t.timeout = int(params::getInt(params::Id::IbTimeout));
  t.retryCnt = int(params::getInt(params::Id::IbRetryCnt));
  t.sl = int(params::getInt(params::Id::IbSl));
  t.tc = int(params::getInt(params::Id::IbTc));
  // -1: NCCL's traffic class for the communicator, where it gives one that fits the field.
  if (t.tc < 0) t.tc = commTrafficClass >= 0 && commTrafficClass <= 255 ? commTrafficClass : 0;
  return t;
}

int qpAccessFlags(QpUse use) { return use == QpUse::Flush ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE; }

int mrAccessFlags(int baseAccess, int memType) {
  const bool flushed = memType != kMemHost || flushHostMemoryForTesting();
  return (baseAccess & ~IBV_ACCESS_REMOTE_READ) | (flushed ? IBV_ACCESS_REMOTE_READ : 0);
}

double budgetSeconds(const QpTuning& t) { return 4.096e-6 * double(1ull << t.timeout) * (t.retryCnt + 1); }

DevAddr localAddr(const Port& port) {
  DevAddr a;
  std::copy(port.gid.raw, port.gid.raw + 16, a.gid.begin());
  a.lid = port.lid;
  a.ethernet = port.ethernet ? 1 : 0;
  a.mtu = uint8_t(port.mtu);
  return a;
}

Status createRcQp(const Port& port, ibv_cq* cq, int maxSend, int maxRecv, QpFaultSink* sink, QpPtr* out,
                  std::string* why, int maxInline, int* gotInline, QpUse use) {
  ibv_qp_init_attr ia{};
  ia.qp_context = sink;
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = maxSend;
  ia.cap.max_recv_wr = maxRecv;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.sq_sig_all = 0;
  ia.cap.max_inline_data = uint32_t(maxInline);
  QpPtr qp(verbs().create_qp(port.hca->pd(), &ia));
  if (!qp && maxInline > 0) {
    ia.cap.max_inline_data = 0;
    qp.reset(verbs().create_qp(port.hca->pd(), &ia));
  }
  if (gotInline) *gotInline = qp ? int(ia.cap.max_inline_data) : 0;
  if (!qp) {
    *why = "ibv_create_qp on " + port.hca->name() + ": " + errnoString(errno);
    return Status::SystemError;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = uint8_t(port.port);
  a.qp_access_flags = unsigned(qpAccessFlags(use));
  if (verbs().modify_qp(qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    *why = "QP RESET->INIT on " + port.hca->name() + ": " + errnoString(errno);
    return Status::SystemError;
  }
  *out = std::move(qp);
  return Status::Ok;
}

Status connectQp(ibv_qp* qp, const Port& local, const DevAddr& remote, uint32_t remoteQpn, const QpTuning& t,
                 std::string* why) {
  if (bool(remote.ethernet) != local.ethernet) {
    *why = std::string("link layers differ: we are ") + (local.ethernet ? "RoCE" : "InfiniBand") + ", the peer is " +
           (remote.ethernet ? "RoCE" : "InfiniBand");
    return Status::RemoteError;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ibv_mtu(std::min<int>(local.mtu, remote.mtu));
  a.dest_qp_num = remoteQpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = uint8_t(local.port);
  a.ah_attr.sl = uint8_t(t.sl);
  if (local.ethernet) {
    // RoCE is always routed by GID.
    a.ah_attr.is_global = 1;
    std::copy(remote.gid.begin(), remote.gid.end(), a.ah_attr.grh.dgid.raw);
    a.ah_attr.grh.sgid_index = uint8_t(local.gidIndex);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = uint8_t(t.tc);
  } else {
    a.ah_attr.is_global = 0;
    a.ah_attr.dlid = remote.lid;
  }
  if (verbs().modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    *why = "QP INIT->RTR on " + local.hca->name() + " (remote QP " + std::to_string(remoteQpn) +
           "): " + errnoString(errno);
    return Status::SystemError;
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = uint8_t(t.timeout);
  s.retry_cnt = uint8_t(t.retryCnt);
  s.rnr_retry = 7;
  s.sq_psn = 0;
  s.max_rd_atomic = 1;
  if (verbs().modify_qp(qp, &s,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    *why = "QP RTR->RTS on " + local.hca->name() + ": " + errnoString(errno);
    return Status::SystemError;
  }
  return Status::Ok;
}

}  // namespace icn::ib
