// CommBase: QPs, CQ polling, health, memory registration (the send side is in ib_send.cc, links and failover in
// ib_link.cc, ib_send_failover.cc and ib_recv_failover.cc).
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>

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

CommBase::CommBase(std::vector<const Port*> ports, bool isSend) : ports_(std::move(ports)), isSend_(isSend) {
  for (const Port* p : ports_)
    linkCounters_.push_back(netstats::railCounters(p->hca->name() + ":" + std::to_string(p->port), RailKind::Ib));
}

CommBase::~CommBase() {
  qps_.clear();  // QPs before their CQs
  retired_.clear();
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
    CqPtr cq(verbs().create_cq(ports_[d]->hca->ctx(), depth, nullptr, nullptr, 0));
    if (!cq) {
      *why = "ibv_create_cq(" + std::to_string(depth) + ") on " + ports_[d]->hca->name() + ": " + errnoString(errno);
      return Status::SystemError;
    }
    cqs_.push_back(std::move(cq));
  }
  for (int i = 0; i < nqps; ++i) {
    QpPtr qp;
    ICN_CHECK(makeQp(i, &qp, why));
    qps_.push_back(std::move(qp));
    watch_.emplace_back();
  }
  return Status::Ok;
}

Status CommBase::makeQp(int i, QpPtr* out, std::string* why) {
  const int m = members();
  // QP 0 of a receiver carries the CTS writes: inline them when the provider allows (no staging DMA).
  const int wantInline = (!isSend_ && i == 0) ? int(sizeof(CtsSlot)) : 0;
  ICN_CHECK(createRcQp(*ports_[i % m], cqs_[i % m].get(), kQueueDepth + kMaxRequests, kQueueDepth, &sink_, out, why,
                       wantInline, i == 0 ? &qp0Inline_ : nullptr));
  // Receives must be posted before the peer can write with immediate (allowed from INIT).
  if (!isSend_ && postRecvsOn(out->get(), i, kQueueDepth) != Status::Ok) {
    *why = "ibv_post_recv: " + errnoString(errno);
    return Status::SystemError;
  }
  return Status::Ok;
}

Status CommBase::postRecvsOn(ibv_qp* qp, int index, int count) {
  ibv_recv_wr wrs[16];
  while (count > 0) {
    int k = count < 16 ? count : 16;
    for (int j = 0; j < k; ++j) {
      wrs[j] = {};
      wrs[j].wr_id = kRecvWrTag | uint64_t(index);
      wrs[j].next = j + 1 < k ? &wrs[j + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(qp, wrs, &bad) != 0) return Status::SystemError;
    count -= k;
  }
  return Status::Ok;
}

Status CommBase::connectQps(const ConnBlob& peer, const QpTuning& t, std::string* why) {
  if (peer.qpns.size() != qps_.size()) {
    *why = "peer has " + std::to_string(peer.qpns.size()) + " QPs, we have " + std::to_string(qps_.size());
    return Status::RemoteError;
  }
  tuning_ = t;
  // Per try 4.096 us x 2^timeout, retry_cnt + 1 tries; the IB spec lets an HCA wait up to 4x longer per try,
  // but any completion within the budget means the QP is alive, so half the budget (at least 2 s) of margin
  // is enough to not race a provider that reports the failure itself.
  const double budget = budgetSeconds(t);
  stallLimit_ = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(budget + std::max(budget / 2, 2.0)));
  for (size_t i = 0; i < qps_.size(); ++i) {
    const Port& local = *ports_[i % ports_.size()];
    const DevAddr& remote = peer.devs[i % peer.devs.size()];
    ICN_CHECK(connectQp(qps_[i].get(), local, remote, peer.qpns[i], t, why));
  }
  peerDevs_ = peer.devs;
  if (peer.devs.size() == ports_.size() && ports_.size() >= 2 && params::getBool(params::Id::IbFailover))
    links_ = int(ports_.size());
  return Status::Ok;
}

void CommBase::start(ControlChannel control, NetCommInfo info) {
  peerName_ = control.peerName();
  control_ = std::move(control);
  if (links_ > 1) control_.enableMessages();  // failover notes; a single-link connection takes none
  counters_ = netstats::registerComm(info);
  if (links_ > 1 && params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "ib %s connection with %s: %d links, failover on (ICN_IB_FAILOVER)",
             isSend_ ? "send" : "receive", peerName_.c_str(), links_);
  diag_ = std::make_unique<diagnose::ConnectionWatch>(diagnose::linkInfoFor(info, control_.fd()));
}

void CommBase::diagnosePosted(IbRequest* r, int tag, uint64_t bytes, bool send) {
  diagnose::LinkMonitor* m = monitor();
  if (!m) return;
  const uint64_t now = diagnose::nowNs();
  r->op = send ? m->onSendPosted(tag, bytes, now) : m->onRecvPosted(tag, bytes, now);
}

void CommBase::diagnoseStarted(IbRequest* r, uint64_t now) {
  if (r->started) return;
  r->started = true;
  diagnose::LinkMonitor* m = monitor();
  if (!m) return;
  if (now == 0) now = diagnose::nowNs();
  if (r->kind == IbRequest::Kind::Send)
    m->onClearToSend(r->op, now);
  else
    m->onFirstByte(r->op, now);
}

Status CommBase::fail(Status st, const std::string& why) {
  if (failed_ == Status::Ok) {
    failed_ = st;
    ICN_WARN(subsys::Net, "ib %s connection with %s failed: %s", isSend_ ? "send" : "receive", peerName_.c_str(),
             why.c_str());
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    for (auto& qp : qps_) verbs().modify_qp(qp.get(), &a, IBV_QP_STATE);
    control_.notifyFailure(std::string("its ib ") + (isSend_ ? "send" : "receive") + " connection failed: " + why);
  }
  return failed_;
}

void CommBase::noteCompleted(int qp) {
  if (qp < 0) return;
  if (watch_[qp].inFlight > 0) --watch_[qp].inFlight;
  watch_[qp].since = coarseNow();
}

// QP numbers are unique per device only (two members' first QPs may both be 17): a completion names its QP by
// number and by the CQ it came on, which is its member's.
int CommBase::qpIndex(uint32_t qpNum, const ibv_cq* cq) const {
  for (size_t i = 0; i < qps_.size(); ++i)
    if (qps_[i]->qp_num == qpNum && qps_[i]->send_cq == cq) return int(i);
  for (const QpPtr& q : retired_)
    if (q->qp_num == qpNum && q->send_cq == cq) return kRetiredQp;
  return -1;
}

Status CommBase::checkStall() {
  const auto now = coarseNow();
  for (size_t i = 0; i < watch_.size(); ++i) {
    const QpWatch& w = watch_[i];
    if (w.inFlight == 0 || now - w.since <= stallLimit_ || !qpLive(int(i))) continue;
    const double perTry = budgetSeconds(QpTuning{tuning_.timeout, 0, 0, 0});
    char buf[400];
    snprintf(buf, sizeof buf,
             "no completion on QP %u for %.1f s with %d signalled WRs outstanding, beyond the QP retry budget "
             "(ICN_IB_TIMEOUT=%d: %.2f s x (ICN_IB_RETRY_CNT=%d + 1) tries = %.1f s), no provider error: packets "
             "lost silently?",
             qps_[i]->qp_num, std::chrono::duration<double>(now - w.since).count(), w.inFlight, tuning_.timeout,
             perTry, tuning_.retryCnt, budgetSeconds(tuning_));
    ICN_CHECK(loseLink(linkOf(int(i)), buf));
  }
  return Status::Ok;
}

Status CommBase::checkHealth(const IbRequest* r) {
  if (failed_ != Status::Ok) return failed_;
  std::string why;
  for (int d = 0; d < members(); ++d) {
    if (linkDead(d) || ports_[d]->healthy(&why) == Status::Ok) continue;
    if (links_ < 2) return fail(Status::SystemError, why);
    ICN_CHECK(loseLink(d, why));
  }
  int ev = sink_.event.load(std::memory_order_relaxed);
  if (ev >= 0)
    return fail(Status::SystemError, std::string("QP fatal event: ") + verbs().event_type_str(ibv_event_type(ev)));
  ICN_CHECK(checkStall());
  ICN_CHECK(serviceControl());
  if (control_.checkAlive() == Status::Ok) return Status::Ok;
  auto now = coarseNow();
  if (peerGoneAt_ == std::chrono::steady_clock::time_point{}) peerGoneAt_ = now;
  if (now - peerGoneAt_ < kPeerGoneGrace) return Status::Ok;
  return fail(Status::RemoteError, "peer is gone (" + control_.deadReason() + ") with a request (tag " +
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
          const int q = qpIndex(wc.qp_num, cq.get());
          if (q == kRetiredQp || (q >= 0 && !qpLive(q))) {  // flushed by the link's death
            ICN_CHECK(onFailedCompletion(wc));
            continue;
          }
          char buf[160];
          snprintf(buf, sizeof buf, "completion error: %s (vendor error 0x%x, QP %u)", verbs().wc_status_str(wc.status),
                   wc.vendor_err, wc.qp_num);
          if (q < 0 || links_ < 2) return fail(Status::RemoteError, buf + describeWr(wc.wr_id));
          ICN_CHECK(loseLink(linkOf(q), buf + describeWr(wc.wr_id)));
          ICN_CHECK(onFailedCompletion(wc));
          continue;
        }
        if (!(wc.opcode & IBV_WC_RECV)) noteCompleted(qpIndex(wc.qp_num, cq.get()));
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
  ICN_CHECK(progress());
  ICN_CHECK(poll());
  bool complete = r->kind == IbRequest::Kind::Recv ? r->subsDone == r->n : r->pending == 0 && r->open == 0;
  if (!complete) {
    Status st = checkHealth(r);
    if (st != Status::Ok && monitor()) monitor()->abandon(r->op);
    return st;
  }
  if (sizes) {
    for (int i = 0; i < r->n; ++i) sizes[i] = int(r->bytes[i]);
  }
  uint64_t total = 0;
  for (int i = 0; i < r->n; ++i) total += r->bytes[i];
  if (r->kind == IbRequest::Kind::Recv && counters_) counters_->add(total);
  if (diagnose::LinkMonitor* m = monitor(); m && r->kind != IbRequest::Kind::Flush) {
    const uint64_t now = diagnose::nowNs();
    diagnoseStarted(r, now);  // a message of 0 bytes: its completion is all there is
    if (r->kind == IbRequest::Kind::Recv)
      m->onRecvDone(r->op, total, now);
    else
      m->onSendDone(r->op, total, now);
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

Status CommBase::tempHandle(IbRequest* r, void* data, size_t size, MemHandle** out) {
  void* mh = nullptr;
  ICN_CHECK(regMrImpl(data, size, kMemHost, -1, 0, &mh));
  r->tmp[r->ntmp++] = static_cast<MemHandle*>(mh);
  *out = static_cast<MemHandle*>(mh);
  return Status::Ok;
}

void CommBase::releaseTemps(IbRequest* r) {
  for (int i = 0; i < r->ntmp; ++i) deregMrImpl(r->tmp[i]);
  r->ntmp = 0;
}

Status CommBase::deregMrImpl(void* mh) {
  std::unique_ptr<MemHandle> h(static_cast<MemHandle*>(mh));
  if (!h) return Status::Ok;
  for (int i = 0; i < h->n; ++i) h->hcas[i]->mrCache().release(h->entries[i]);
  return Status::Ok;
}

}  // namespace icn::ib
