// Send side of the failover between the links of a fused device (see CommBase in ib_comm.h): what is lost when a
// link dies, the resend the receiver's report asks for, and the re-admission of a link that came back.
#include <algorithm>

#include "core/coarse_clock.h"
#include "core/log.h"
#include "transport/ib/ib_comm.h"

namespace icn::ib {

int IbSendComm::nextLiveQp() {
  for (int k = 0; k < qpCount(); ++k) {
    const int q = (rr_ + k) % qpCount();
    if (qpLive(q)) {
      rr_ = q + 1;
      return q;
    }
  }
  return 0;  // unreachable: loseLink never lets the last link die
}

void IbSendComm::onLinkLost(int link) {
  Rejoin& j = rejoin_[link];
  const auto now = coarseNow();
  // A link that dies again within 10 s of its return waits twice as long before the next offer (hysteresis).
  using std::chrono::milliseconds;
  const bool flapped =
      j.admittedAt != std::chrono::steady_clock::time_point{} && now - j.admittedAt < std::chrono::seconds(10);
  j.backoff = flapped ? std::min<milliseconds>(j.backoff * 2, std::chrono::seconds(8)) : milliseconds(500);
  j.diedAt = now;
  j.nextTry = now + j.backoff;
  pool_.forEach([&](IbRequest& r) {
    if (!r.inUse || !r.sent) return;
    for (int c = 0; c < r.nchunks; ++c)
      if ((r.open & (1u << c)) && linkOf(r.qpOf[c]) == link) r.lost |= uint16_t(1u << c);
  });
  FailoverNote fence;
  fence.type = NoteType::Fence;
  fence.link = uint8_t(link);
  if (!sendNote(fence))
    fail(Status::RemoteError, "could not send the failover fence for link " + std::to_string(link));
}

Status IbSendComm::onNote(const FailoverNote& n) {
  if (n.type == NoteType::Accept || n.type == NoteType::Refuse) return onRejoinAnswer(n);
  if (n.type == NoteType::Rejoin) return fail(Status::RemoteError, "failover note meant for a receiver");
  if (!linkDead(n.link)) ICN_CHECK(loseLink(n.link, "the receiver reports it dead"));
  if (n.type != NoteType::Report) return Status::Ok;  // a fence from the receiver: ours went out in loseLink
  Status st = Status::Ok;
  int chunks = 0, sends = 0;
  pool_.forEach([&](IbRequest& r) {
    if (st != Status::Ok || !r.inUse || !r.sent || !r.lost) return;
    int resent = 0;
    st = resendLost(&r, n, &resent);
    chunks += resent;
    sends += resent > 0;
  });
  if (st == Status::Ok)
    ICN_INFO(subsys::Net, "ib send to %s: link %d report (%zu receive(s) waiting): %d chunk(s) of %d send(s) resent",
             peer().c_str(), int(n.link), n.pending.size(), chunks, sends);
  return st;
}

// The receiver's report for a dead link settles each lost chunk on it: held, part of a receive that completed
// (every chunk is in), or missing (sent again on a live QP).
Status IbSendComm::resendLost(IbRequest* r, const FailoverNote& report, int* resent) {
  uint16_t onLink = 0;
  for (int c = 0; c < r->nchunks; ++c)
    if ((r->lost & (1u << c)) && linkOf(r->qpOf[c]) == report.link) onLink |= uint16_t(1u << c);
  if (!onLink) return Status::Ok;
  uint16_t have = 0;
  const PendingRecv* entry = nullptr;
  for (const PendingRecv& p : report.pending)
    if (p.slot == r->slot && p.seq == r->seq) entry = &p;
  if (entry) {
    if (r->sub >= entry->nsub)
      return fail(Status::RemoteError, "failover report lists " + std::to_string(entry->nsub) +
                                           " sub-requests for a receive we sent sub-request " +
                                           std::to_string(r->sub) + " of");
    have = entry->have[r->sub];
  } else if (int32_t(r->seq - report.nextSeq) < 0) {
    have = onLink;  // not listed and older than the report: that receive is complete
  }                 // else posted after the report: after the fence, so nothing of it came over the dead link
  r->lost &= uint16_t(~onLink);
  r->open &= uint16_t(~(onLink & have));
  const uint16_t again = onLink & uint16_t(~have);
  for (int c = 0; c < r->nchunks; ++c) {
    if (!(again & (1u << c))) continue;
    ICN_CHECK(postChunk(r, c, nextLiveQp()));
    ++*resent;
  }
  return Status::Ok;
}

Status IbSendComm::maybeRejoin() {
  if (!deadLinks_ || failed_ != Status::Ok) return failed_;
  const auto now = coarseNow();
  for (int l = 0; l < links_; ++l) {
    Rejoin& j = rejoin_[l];
    if (!linkDead(l)) continue;
    if (!j.fresh.empty()) {
      if (now - j.offeredAt < std::chrono::seconds(5)) continue;
      j.fresh.clear();  // no answer: offer again later
      j.nextTry = now + j.backoff;
      continue;
    }
    std::string why;
    if (now < j.nextTry || !canRetire(l) || ports_[l]->healthy(&why) != Status::Ok) continue;
    bool settled = true;  // every chunk lost on the link has had its report
    pool_.forEach([&](const IbRequest& r) {
      for (int c = 0; r.inUse && r.sent && c < r.nchunks; ++c)
        if ((r.lost & (1u << c)) && linkOf(r.qpOf[c]) == l) settled = false;
    });
    if (!settled) continue;
    FailoverNote offer;
    offer.type = NoteType::Rejoin;
    offer.link = uint8_t(l);
    offer.offer = ++offers_;
    for (int i : qpsOfLink(l)) {
      QpPtr qp;
      if (makeQp(i, &qp, &why) != Status::Ok) {
        ICN_INFO(subsys::Net, "ib send to %s: no new QP for link %d yet: %s", peer().c_str(), l, why.c_str());
        j.fresh.clear();
        break;
      }
      offer.qpns.push_back(qp->qp_num);
      j.fresh.push_back(std::move(qp));
    }
    if (j.fresh.empty()) {
      j.nextTry = now + j.backoff;
      continue;
    }
    if (!sendNote(offer)) return fail(Status::RemoteError, "could not offer link " + std::to_string(l) + " again");
    j.offer = offer.offer;
    j.offeredAt = now;
  }
  return Status::Ok;
}

Status IbSendComm::onRejoinAnswer(const FailoverNote& n) {
  Rejoin& j = rejoin_[n.link];
  // An answer to an offer given up (the receiver was slow to answer, and another offer may be out since): its QPs
  // are connected to ones we retired, and die unused; the receiver drops them at our next offer.
  if (!linkDead(n.link) || j.fresh.empty() || n.offer != j.offer) {
    if (n.type == NoteType::Accept)
      ICN_INFO(subsys::Net, "ib send to %s: late answer to rejoin offer %u of link %d ignored", peer().c_str(),
               n.offer, int(n.link));
    return Status::Ok;
  }
  const auto now = coarseNow();
  if (n.type == NoteType::Refuse) {  // the receiver's port is not back yet: ask again in a second
    j.fresh.clear();
    j.nextTry = now + std::max<std::chrono::milliseconds>(j.backoff, std::chrono::seconds(1));
    return Status::Ok;
  }
  std::string why;
  const auto setupStart = std::chrono::steady_clock::now();
  if (readmit(n.link, &j.fresh, n.qpns, &why) != Status::Ok)
    return fail(Status::RemoteError, "re-admitting link " + std::to_string(n.link) + ": " + why);
  j.admittedAt = now;
  ICN_INFO(subsys::Net,
           "ib send to %s: link %d (%s port %d) re-admitted %.1f s after it failed (QPs connected in %.3f s)",
           peer().c_str(), int(n.link), ports_[n.link]->hca->name().c_str(), ports_[n.link]->port,
           std::chrono::duration<double>(now - j.diedAt).count(),
           std::chrono::duration<double>(std::chrono::steady_clock::now() - setupStart).count());
  return Status::Ok;
}

}  // namespace icn::ib
