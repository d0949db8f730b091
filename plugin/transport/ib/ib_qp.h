// RC queue pairs: creation and the INIT -> RTR -> RTS walk with the configured timeout/retry/SL/TC.
#pragma once
#include <string>

#include "transport/ib/ib_device.h"
#include "transport/ib/ib_wire.h"

namespace icn::ib {

struct QpTuning {
  int timeout = 18;    // ACK timeout exponent: 4.096 us x 2^timeout
  int retryCnt = 7;
  int sl = 0;
  int tc = 0;
};
// Seconds an RC QP may go without an acknowledgement before the HCA must report RETRY_EXC_ERR:
// 4.096 us x 2^timeout per try, retryCnt + 1 tries.
double budgetSeconds(const QpTuning& t);
// From ICN_IB_TIMEOUT / ICN_IB_RETRY_CNT / ICN_IB_SL / ICN_IB_TC, the TC falling back to NCCL's per-comm one.
QpTuning qpTuningFromParams(int commTrafficClass);

// Remote access a QP serves. A data QP's peer only writes (payload with immediate into our receive buffers, CTS
// entries into our FIFO), so it may not read; only the receiver's flush QP, connected to itself, serves RDMA
// reads (the 1-byte read that flushes GPU writes).
enum class QpUse { Data, Flush };
int qpAccessFlags(QpUse use);
// Access flags of a memory registration from the HCA's base flags: REMOTE_READ only for memory the flush reads
// (device memory; host memory too when the flush test hook is on), never for other host memory.
int mrAccessFlags(int baseAccess, int memType);
bool flushHostMemoryForTesting();  // see setFlushHostMemoryForTesting (ib_comm.h)

// Creates an RC QP on port's HCA; qp_context = sink (fault reporting). Leaves it in INIT.
// maxInline > 0 asks for inline sends of that many bytes; *gotInline reports what the provider granted (0 when
// it refused: the QP is then created without inline data).
Status createRcQp(const Port& port, ibv_cq* cq, int maxSend, int maxRecv, QpFaultSink* sink, QpPtr* out,
                  std::string* why, int maxInline = 0, int* gotInline = nullptr, QpUse use = QpUse::Data);
// Connects a QP in INIT to the remote one: RTR (path MTU = min of both ends) then RTS.
Status connectQp(ibv_qp* qp, const Port& local, const DevAddr& remote, uint32_t remoteQpn, const QpTuning& t,
                 std::string* why);
// Our own address as the peer needs it.
DevAddr localAddr(const Port& port);

}  // namespace icn::ib
