// Receive side of the failover between the links of a fused device (see CommBase in ib_comm.h): the report of
// what each waiting receive holds, the clear-to-send moving off a dead link, and accepting a link back.
#include "core/log.h"
#include "transport/ib/ib_comm.h"

namespace icn::ib {

void IbRecvComm::onLinkLost(int link) {
  reportDue_ |= 1u << link;
  if (linkOf(ctsQp_) == link) ctsMoveDue_ = true;
}

Status IbRecvComm::onNote(const FailoverNote& n) {
  if (n.type == NoteType::Rejoin) return onRejoin(n);
  if (n.type != NoteType::Fence) return fail(Status::RemoteError, "failover note meant for a sender");
  if (!linkDead(n.link)) ICN_CHECK(loseLink(n.link, "the sender reports it dead"));
  reportDue_ |= 1u << n.link;
  return Status::Ok;
}

// The sender offers new QPs for a dead link: accepted (ours, connected to them, answered) once our port is back
// and the link's report went out; refused otherwise (the sender tries again later).
Status IbRecvComm::onRejoin(const FailoverNote& n) {
  FailoverNote answer;
  answer.type = NoteType::Refuse;
  answer.link = n.link;
  answer.offer = n.offer;
  std::string why;
  std::chrono::steady_clock::time_point setupStart{};
  const std::vector<int> idx = qpsOfLink(n.link);
  // An offer for a link we hold live: the sender gave up waiting for our answer to an earlier offer (we had taken
  // the link back, it had not). Drop ours; the next offer, after our report, is accepted.
  if (!linkDead(n.link)) ICN_CHECK(loseLink(n.link, "the sender offers it again"));
  if (!linkDead(n.link) || (reportDue_ & (1u << n.link)) || n.qpns.size() != idx.size() || !canRetire(n.link)) {
    why = "not expected";
  } else if (ports_[n.link]->healthy(&why) == Status::Ok) {
    setupStart = std::chrono::steady_clock::now();
    std::vector<QpPtr> fresh(idx.size());
    Status st = Status::Ok;
    for (size_t k = 0; k < idx.size() && st == Status::Ok; ++k) st = makeQp(idx[k], &fresh[k], &why);
    for (size_t k = 0; k < idx.size() && st == Status::Ok; ++k) answer.qpns.push_back(fresh[k]->qp_num);
    if (st == Status::Ok) st = readmit(n.link, &fresh, n.qpns, &why);
    if (st == Status::Ok) answer.type = NoteType::Accept;
  }
  if (!sendNote(answer))
    return fail(Status::RemoteError, "could not answer the sender's rejoin of link " + std::to_string(n.link));
  if (answer.type == NoteType::Accept)
    ICN_INFO(subsys::Net, "ib receive from %s: link %d (%s port %d) re-admitted (its QPs set up in %.3f s)",
             peer().c_str(), int(n.link), ports_[n.link]->hca->name().c_str(), ports_[n.link]->port,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - setupStart).count());
  else
    ICN_INFO(subsys::Net, "ib receive from %s: rejoin of link %d refused: %s", peer().c_str(), int(n.link),
             why.c_str());
  return Status::Ok;
}

Status IbRecvComm::moveCts() {
  ctsMoveDue_ = false;
  for (int q = 0; q < qpCount(); ++q) {
    if (!qpLive(q)) continue;
    ctsQp_ = q;
    break;
  }
  int rewritten = 0;
  for (uint32_t s = 0; s < kFifoSlots; ++s) {
    if (!slotReq_[s]) continue;
    ICN_CHECK(postCts(s, slotReq_[s]->n, true));  // the sender ignores a copy of a slot it already used
    ++rewritten;
  }
  ICN_INFO(subsys::Net, "ib receive from %s: clear-to-send moved to QP %d (link %d), %d pending slot(s) written again",
           peer().c_str(), ctsQp_, linkOf(ctsQp_), rewritten);
  return Status::Ok;
}

// Once the dead links' QPs are in the error state, their completions drained and the CTS moved: one report per
// link that the sender is owed.
Status IbRecvComm::finishFailover() {
  if (!reportDue_ && !ctsMoveDue_) return Status::Ok;
  ICN_CHECK(poll());
  if (ctsMoveDue_) ICN_CHECK(moveCts());
  FailoverNote note;
  note.type = NoteType::Report;
  note.nextSeq = uint32_t(seq_);
  for (uint32_t s = 0; s < kFifoSlots; ++s) {
    const IbRequest* r = slotReq_[s];
    if (!r) continue;
    PendingRecv p;
    p.slot = uint8_t(s);
    p.nsub = uint8_t(r->n);
    p.seq = r->seq;
    for (int k = 0; k < r->n; ++k) p.have[k] = r->have[k];
    note.pending.push_back(p);
  }
  for (int l = 0; l < links_; ++l) {
    if (!(reportDue_ & (1u << l))) continue;
    note.link = uint8_t(l);
    if (!sendNote(note))
      return fail(Status::RemoteError, "could not send the failover report for link " + std::to_string(l));
    ICN_INFO(subsys::Net, "ib receive from %s: link %d report sent (%zu receive(s) waiting for data)", peer().c_str(),
             l, note.pending.size());
  }
  reportDue_ = 0;
  return Status::Ok;
}

}  // namespace icn::ib
