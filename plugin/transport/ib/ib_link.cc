// CommBase's links (see ib_comm.h): a link's death, the failover notes on the control connection, and the swap of
// a re-admitted link's QPs.
#include <bit>

#include "core/log.h"
#include "transport/ib/ib_comm.h"

namespace icn::ib {

std::vector<int> CommBase::qpsOfLink(int link) const {
  std::vector<int> v;
  for (int i = 0; i < qpCount(); ++i)
    if (linkOf(i) == link) v.push_back(i);
  return v;
}

Status CommBase::readmit(int link, std::vector<QpPtr>* fresh, const std::vector<uint32_t>& peerQpns,
                         std::string* why) {
  const std::vector<int> idx = qpsOfLink(link);
  if (fresh->size() != idx.size() || peerQpns.size() != idx.size()) {
    *why = std::to_string(peerQpns.size()) + " QPs offered for a link of " + std::to_string(idx.size());
    return Status::RemoteError;
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    const int i = idx[k];
    ICN_CHECK(connectQp((*fresh)[k].get(), *ports_[link], peerDevs_[i % peerDevs_.size()], peerQpns[k], tuning_, why));
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    const int i = idx[k];
    retired_.push_back(std::move(qps_[i]));
    qps_[i] = std::move((*fresh)[k]);
    watch_[i] = QpWatch{};
  }
  fresh->clear();
  deadLinks_ &= ~(1u << link);
  if (RailCounters* c = linkCounter(link)) c->back.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok;
}

Status CommBase::loseLink(int link, const std::string& why) {
  if (failed_ != Status::Ok) return failed_;
  const uint32_t dead = deadLinks_ | 1u << link;
  if (links_ < 2 || std::popcount(dead) >= links_) return fail(Status::RemoteError, why);
  deadLinks_ = dead;
  if (RailCounters* c = linkCounter(link)) c->givenUp.fetch_add(1, std::memory_order_relaxed);
  const Port& p = *ports_[link];
  ICN_WARN(subsys::Net, "ib %s connection with %s: link %d (%s port %d) failed: %s; going on over %d of %d links",
           isSend_ ? "send" : "receive", peerName_.c_str(), link, p.hca->name().c_str(), p.port, why.c_str(),
           links_ - std::popcount(dead), links_);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;  // nothing lands through it any more; what was posted on it completes as flushed
  for (size_t i = 0; i < qps_.size(); ++i)
    if (linkOf(int(i)) == link) verbs().modify_qp(qps_[i].get(), &a, IBV_QP_STATE);
  onLinkLost(link);
  return Status::Ok;
}

bool CommBase::sendNote(const FailoverNote& n) {
  std::vector<uint8_t> bytes = encodeNote(n);
  return control_.sendMessage(bytes);
}

Status CommBase::serviceControl() {
  if (links_ < 2 || failed_ != Status::Ok) return failed_;
  if (control_.checkAlive() == Status::Ok) {
    std::vector<uint8_t> msg;
    while (control_.nextMessage(&msg)) {
      FailoverNote note;
      std::string why;
      if (decodeNote(msg, &note, &why) != Status::Ok) return fail(Status::RemoteError, why);
      if (note.link >= links_) return fail(Status::RemoteError, "failover note for link " + std::to_string(note.link));
      ICN_CHECK(onNote(note));
    }
  }
  return finishFailover();
}

}  // namespace icn::ib
