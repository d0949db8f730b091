// Send side, the lanes' health: one look every 10 ms at each lane socket's delivery, which feeds the failover
// watch (a lane that stalls is given up) and the diagnosis's wire measure; giving lanes up, resending their
// pieces, offering them again; and when a send over the helper lanes is delivered.
#include <string.h>

#include <algorithm>

#include "core/log.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_paths.h"

namespace icn::tcp {
namespace {
// A lane back from a failure logs this many of its first rate samples.
constexpr uint8_t kReturnSamplesLogged = 3;
}  // namespace

// Every 10 ms: a TCP_INFO read per live helper lane (lane 0 instead for the wire measure of a connection without
// helper lanes), handed to the failover watch and the wire measure; then the look is the next one's baseline. A
// lane that was handed nothing since a read that found it still is not read: its counts cannot have moved, and a
// connection of small messages (all on lane 0) then makes no system call here.
void TcpSendComm::lookAtLanes(int64_t nowNs) {
  if (nowNs < nextLookNs_) return;
  nextLookNs_ = nowNs + 10'000'000;
  LaneLook look;
  for (size_t lane = wireOn_ && helpers_.empty() ? 0 : 1; lane <= helpers_.size(); lane++) {
    TcpBusy& b = look.now[lane];
    if (lane == 0) {
      look.got[0] = tcpBusy(lane0_.get(), &b);
    } else if (laneState_[lane] == LaneState::Live && !helpers_[lane - 1]->failed()) {
      const uint64_t written = helpers_[lane - 1]->written();
      look.idle[lane] = looked_[lane] && stillAtLook_[lane] && written == writtenAtLook_[lane];
      if (look.idle[lane]) continue;
      writtenAtLook_[lane] = written;
      look.got[lane] = helpers_[lane - 1]->busy(&b);
    }
  }
  if (failover_) watchDelivery(nowNs, look);
  if (wireOn_) sampleWire(look);
  for (size_t lane = 0; lane <= helpers_.size(); lane++) {
    if (look.idle[lane]) continue;  // the last read stays the baseline
    const TcpBusy& b = look.now[lane];
    stillAtLook_[lane] = look.got[lane] && looked_[lane] && b.bytesAcked == lookBusy_[lane].bytesAcked &&
                         b.busyUs == lookBusy_[lane].busyUs;  // netUs is part of busyUs
    looked_[lane] = look.got[lane];
    if (look.got[lane]) lookBusy_[lane] = b;
  }
}

// The diagnosis's wire measure (diagnose/link_monitor.h): what each socket's peer acknowledged since the last look
// and how long the socket was busy with the link setting the pace; the lanes work side by side, so the connection
// was busy their longest time. Lane 0 counts only where there are no helper lanes: it carries the small messages
// and records, one at a time, so it is busy for as long as the application keeps sending them (its round trips and
// delayed acknowledgements), and its time would bring every link's rate down to the application's pace.
void TcpSendComm::sampleWire(const LaneLook& look) {
  uint64_t bytes = 0, busyUs = 0;
  for (size_t lane = 0; lane <= helpers_.size(); lane++) {
    const TcpBusy& b = look.now[lane];
    const TcpBusy& last = lookBusy_[lane];
    if (!look.got[lane] || !looked_[lane] || b.netUs < last.netUs || b.bytesAcked < last.bytesAcked) continue;
    bytes += b.bytesAcked - last.bytesAcked;
    busyUs = std::max(busyUs, b.netUs - last.netUs);
  }
  // Bytes whose busy time the kernel's jiffy count rounded to nothing still count: dropping them would bias the
  // rate of a fast link, whose sends often end within a jiffy, low.
  if (bytes > 0 || busyUs > 0) watch_->monitor().onWire(bytes, busyUs * 1000);
}

// A lane whose peer's TCP acknowledges nothing of what it holds for ICN_TCP_LANE_STALL_MS while another lane's
// acknowledgements move has lost its link: its writes may all have gone into the socket buffer, so the writer's
// own watch never sees it.
void TcpSendComm::watchDelivery(int64_t nowNs, const LaneLook& look) {
  const int64_t stallNs = static_cast<int64_t>(laneStall_.count()) * 1'000'000;
  std::array<bool, kMaxLanes + 1> waiting{};
  for (size_t i = 0; i < helpers_.size(); i++) {
    const size_t lane = i + 1;
    if (laneState_[lane] != LaneState::Live || helpers_[i]->failed()) continue;
    const uint64_t acked = helpers_[i]->delivered();
    waiting[lane] = acked < helpers_[i]->written();
    // The acknowledgement came after the last look, perhaps long ago when the comm sat unused: counted from then.
    if (acked != ackSeen_[lane]) lastAckNs_[lane] = std::max(lastAckNs_[lane], lastWatchNs_);
    const TcpBusy& b = look.now[lane];
    const TcpBusy& last = lookBusy_[lane];
    if (look.got[lane] && looked_[lane] && b.busyUs >= last.busyUs && b.bytesAcked >= last.bytesAcked)
      helpers_[i]->noteBusy(b.bytesAcked - last.bytesAcked, static_cast<int64_t>(b.busyUs - last.busyUs) * 1000);
    if (returnSamplesToLog_[lane] > 0 && helpers_[i]->samples() != samplesSeen_[lane])
      logSampleAfterReturn(lane, nowNs);
    if (acked != ackSeen_[lane] || !waiting[lane] || ackMovedNs_[lane] == 0) {
      ackSeen_[lane] = acked;
      ackMovedNs_[lane] = nowNs;
    }
  }
  lastWatchNs_ = nowNs;
  for (size_t i = 0; i < helpers_.size(); i++) {
    const size_t lane = i + 1;
    if (!waiting[lane] || nowNs - ackMovedNs_[lane] < stallNs) continue;
    bool othersMoved = false;
    for (size_t k = 1; k <= helpers_.size(); k++)
      othersMoved |= k != lane && laneState_[k] == LaneState::Live && nowNs - ackMovedNs_[k] < stallNs / 2;
    if (othersMoved)
      helpers_[i]->giveUp("its peer acknowledged nothing for " + std::to_string(stallNs / 1'000'000) +
                          " ms (ICN_TCP_LANE_STALL_MS) while other lanes' acknowledgements moved");
  }
}

// The lanes' rates per rail next to the returned lane's own: a rail that moves again at its rate carries its share
// of each message; one measured low carries less until a later sample (or the probe) says otherwise.
void TcpSendComm::logSampleAfterReturn(int lane, int64_t nowNs) {
  const SendHelper& helper = *helpers_[static_cast<size_t>(lane - 1)];
  samplesSeen_[lane] = helper.samples();
  returnSamplesToLog_[lane]--;
  const std::vector<double> rates = railRates(false);
  std::string perRail;
  char buf[96];
  for (size_t k = 0; k < railNames_.size(); k++) {
    snprintf(buf, sizeof buf, "%s%s %.1f", perRail.empty() ? "" : ", ", railNames_[k].c_str(), rates[k] / 1e6);
    perRail += buf;
  }
  ICN_INFO(subsys::Net, "TCP connection to %s: lane %d on %s measures %.1f MB/s, %.2f s after it came back "
           "(per lane: %s MB/s)", failure_.peer().c_str(), lane, railNameOf(lane).c_str(),
           helper.measuredRate() / 1e6, static_cast<double>(nowNs - admittedAtNs_[lane]) / 1e9, perRail.c_str());
}

Status TcpSendComm::checkLanes(int64_t now) {
  followPathFailures(now);
  for (size_t i = 0; i < helpers_.size(); i++) {
    const int lane = static_cast<int>(i) + 1;
    if (laneState_[lane] == LaneState::Live && helpers_[i]->failed()) ICN_CHECK(retireLane(lane));
  }
  if (deadLanes_ > 0) ICN_CHECK(rejoinLanes(now));
  return Status::Ok;
}

// Another connection's lane on the same two addresses failed: this connection's lanes there, admitted before that
// and acknowledged by nothing since, are given up now rather than each after a piece stalls on it
// (ICN_TCP_LANE_STALL_MS, one connection after another while a collective waits on each in turn). A lane acknowledged
// since works and stays; one holding a message sent before its receive is left to its own watch (giving it up
// fails the connection).
void TcpSendComm::followPathFailures(int64_t nowNs) {
  const uint64_t gen = paths().generation();
  if (gen == pathGen_ && (pathRecheckNs_ == 0 || nowNs < pathRecheckNs_)) return;
  pathGen_ = gen;
  pathRecheckNs_ = 0;
  for (size_t i = 0; i < helpers_.size(); i++) {
    const size_t lane = i + 1;
    if (laneState_[lane] != LaneState::Live || helpers_[i]->failed() || heldOn_[lane] > 0) continue;
    const int64_t at = paths().failedAt(laneLocal_[lane], lanePeer_[lane]);
    const bool waiting = helpers_[i]->delivered() < helpers_[i]->written();
    const PathVerdict v = judgeLaneOnPath(at, admittedAtNs_[lane], lastAckNs_[lane], waiting, nowNs);
    if (v == PathVerdict::LookAgain) {  // its verdict can change only once its quiet bound has passed
      const int64_t at = lastAckNs_[lane] + kPathQuietNs;
      pathRecheckNs_ = pathRecheckNs_ == 0 ? at : std::min(pathRecheckNs_, at);
    }
    if (v != PathVerdict::GiveUp) continue;
    pathFollowed_[lane] = true;
    helpers_[i]->giveUp("a lane between the same two addresses failed " + std::to_string((nowNs - at) / 1'000'000) +
                        " ms ago, and this one had no acknowledgement since");
  }
}

namespace {
constexpr int64_t kFirstHoldBackNs = 500'000'000;  // a lane given up is offered again this soon
constexpr int64_t kMaxHoldBackNs = 30'000'000'000;
// Failing again within this of its return: a flapping rail, held back twice as long as the last time. A rail that
// carried for longer paid for its next failure's stall (at most about ICN_TCP_LANE_STALL_MS and a resend) with
// seconds of its share, so it is offered again as soon as the first time.
constexpr int64_t kFlapNs = 3'000'000'000;
}  // namespace

// A closed lane is offered again once its hold-back has passed: listening on its own address, the offer on lane 0.
Status TcpSendComm::rejoinLanes(int64_t nowNs) {
  for (size_t i = 0; i < helpers_.size(); i++) {
    const int lane = static_cast<int>(i) + 1;
    if (laneState_[lane] == LaneState::Closed && nowNs - closedAtNs_[lane] >= holdBackNs_[lane])
      ICN_CHECK(offerLane(lane));
    else if (laneState_[lane] == LaneState::Offered)
      ICN_CHECK(acceptRejoin(lane));
  }
  return Status::Ok;
}

Status TcpSendComm::offerLane(int lane) {
  std::unique_ptr<OobListener> l;
  if (OobListener::openAt(kTransportTcp, commId_, 1, laneLocal_[static_cast<size_t>(lane)], &l) != Status::Ok) {
    closedAtNs_[lane] = steadyNowNs();  // its address is gone for now: try again later, less often
    holdBackNs_[lane] = std::min(2 * holdBackNs_[lane], kMaxHoldBackNs);
    return Status::Ok;
  }
  const SockAddr& at = l->address();
  const uint16_t port = at.family() == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&at.storage)->sin6_port)
                                                : ntohs(reinterpret_cast<const sockaddr_in*>(&at.storage)->sin_port);
  rejoinListener_[lane] = std::move(l);
  laneState_[lane] = LaneState::Offered;
  queueLaneNotice(kChunkLaneOffer, lane, port);
  return Status::Ok;
}

void TcpSendComm::queueLaneNotice(uint16_t flags, int lane, uint32_t port, int index) {
  ChunkHeader h;
  h.flags = flags;
  h.slot = static_cast<uint8_t>(lane);
  h.index = static_cast<uint8_t>(index);
  h.offset = port;
  SendJob& j = lane0Jobs_[lane0Tail_++ % lane0Jobs_.size()];  // room: kMaxLanes of each kind besides the sends
  j.header = h;
  j.data = nullptr;
  j.pending = nullptr;
  j.streamEnd = nullptr;
  j.sent = 0;
  j.early = 0;
}

// A dropped copy of lane 0 is offered again once its hold-back has passed (longer each time it fails within 3 s
// of its return), from its own address, the offer going out on the copy that is left.
Status TcpSendComm::rejoinCopies(int64_t nowNs) {
  for (int c = 0; c < 2; c++) {
    const size_t i = static_cast<size_t>(c);
    if (mirror_->live(c)) continue;
    if (copyDownAtNs_[i] == 0) {
      copyDownAtNs_[i] = nowNs;
      const bool flapping = copyAdmittedAtNs_[i] != 0 && nowNs - copyAdmittedAtNs_[i] < kFlapNs;
      copyHoldBackNs_[i] = flapping ? std::min(2 * std::max(copyHoldBackNs_[i], kFirstHoldBackNs), kMaxHoldBackNs)
                                    : kFirstHoldBackNs;
      if (RailCounters* rc = railCounters_[static_cast<size_t>(c == 0 ? laneRail_[0] : copyRail_)].get())
        rc->givenUp++;
    }
    if (copyListener_[i]) {
      ICN_CHECK(acceptCopy(c));
      continue;
    }
    if (nowNs - copyDownAtNs_[i] < copyHoldBackNs_[i] || mirror_->liveCopies() == 0) continue;
    std::unique_ptr<OobListener> l;
    if (OobListener::openAt(kTransportTcp, commId_, 1, copyLocal_[i], &l) != Status::Ok) {
      copyHoldBackNs_[i] = std::min(2 * copyHoldBackNs_[i], kMaxHoldBackNs);  // its address is gone for now
      copyDownAtNs_[i] = nowNs;
      continue;
    }
    const SockAddr& at = l->address();
    const uint16_t port = at.family() == AF_INET6
                              ? ntohs(reinterpret_cast<const sockaddr_in6*>(&at.storage)->sin6_port)
                              : ntohs(reinterpret_cast<const sockaddr_in*>(&at.storage)->sin_port);
    copyListener_[i] = std::move(l);
    queueLaneNotice(kChunkLaneOffer, 0, port, c);
  }
  return Status::Ok;
}

Status TcpSendComm::acceptCopy(int c) {
  const size_t i = static_cast<size_t>(c);
  Fd fd;
  acceptOffer(*copyListener_[i], copyHs_[i], -1, &fd);
  if (!fd.valid()) return Status::Ok;
  copyListener_[i].reset();
  readmitCopy(c, std::move(fd), copyDownAtNs_[i], true);
  copyAdmittedAtNs_[i] = steadyNowNs();
  copyDownAtNs_[i] = 0;
  copiesBack_++;
  if (RailCounters* rc = railCounters_[static_cast<size_t>(c == 0 ? laneRail_[0] : copyRail_)].get()) rc->back++;
  return Status::Ok;
}

void TcpSendComm::acceptOffer(OobListener& listener, std::unique_ptr<Handshake>& hs, int lane, Fd* fd) {
  if (!hs) {
    std::vector<AcceptedHandshake> ready;
    if (listener.poll(1, &ready) != Status::Ok) return;  // logged; the offer stands
    for (AcceptedHandshake& a : ready) {
      if (!isLaneBlob(a.hs->peer(), lane)) {
        const std::string what = lane < 0 ? "lane 0's copy" : "lane " + std::to_string(lane);
        ICN_WARN(subsys::Net, "TCP connection to %s: a connection to %s's offer from %s names another lane or "
                 "connection", failure_.peer().c_str(), what.c_str(), a.hs->peerName().c_str());
        continue;
      }
      a.hs->confirm(laneBlob(lane));
      hs = std::move(a.hs);
      break;
    }
    if (!hs) return;
  }
  Handshake::Phase phase;
  if (hs->progress(&phase) != Status::Ok) {  // logged with the peer's name; the offer stands
    hs.reset();
    return;
  }
  if (phase != Handshake::Phase::Done) return;
  *fd = hs->takeFd();
  hs.reset();
}

Status TcpSendComm::acceptRejoin(int lane) {
  Fd fd;
  acceptOffer(*rejoinListener_[lane], rejoinHs_[lane], lane, &fd);
  if (!fd.valid()) return Status::Ok;
  rejoinListener_[lane].reset();
  tuneLane(fd.get());
  const size_t i = static_cast<size_t>(lane - 1);
  bytesOfFormerHelpers_[static_cast<size_t>(lane)] += helpers_[i]->bytesSent();
  std::vector<std::unique_ptr<Helper>> old;
  old.push_back(std::move(helpers_[i]));  // stopped when the lane was given up
  reaper().adopt(std::move(old));
  helpers_[i] = makeHelper(std::move(fd), lane);
  const int64_t now = steadyNowNs();
  ICN_INFO(subsys::Net, "TCP connection to %s: lane %d on %s carries pieces again, %.1f s after it was given up",
           failure_.peer().c_str(), lane, railNameOf(lane).c_str(),
           static_cast<double>(now - downAtNs_[lane]) / 1e9);
  laneState_[lane] = LaneState::Live;
  admittedAtNs_[lane] = now;
  lastAckNs_[lane] = now;
  ackSeen_[lane] = 0;
  ackMovedNs_[lane] = 0;
  looked_[lane] = false;  // a new socket: its counts start again
  returnSamplesToLog_[lane] = kReturnSamplesLogged;
  samplesSeen_[lane] = 0;
  deadLanes_--;
  rejoined_++;
  if (RailCounters* c = railCountersOf(lane)) c->back++;
  return Status::Ok;
}

Status TcpSendComm::retireLane(int lane) {
  SendHelper& helper = *helpers_[static_cast<size_t>(lane - 1)];
  const std::string& rail = railNameOf(lane);
  if (heldOn_[lane] > 0) {
    failure_.fail(Status::RemoteError, "lane " + std::to_string(lane) + " on " + rail + " failed (" +
                                           helper.failReason() + ") holding a message sent before its receive");
    return Status::RemoteError;
  }
  // What the peer's TCP acknowledged is in its socket buffer: the receiver reads it before closing the lane.
  deliveredAtDown_[lane] = helper.delivered();
  const int64_t now = steadyNowNs();
  // The other connections over the same two addresses hear of it (tcp_paths.h); a lane given up on their word
  // is not news.
  if (!pathFollowed_[lane]) paths().failed(laneLocal_[lane], lanePeer_[lane], now);
  pathFollowed_[lane] = false;
  downAtNs_[lane] = now;
  // A rail that fails soon after it came back is held back longer each time.
  const bool flapping = admittedAtNs_[lane] != 0 && now - admittedAtNs_[lane] < kFlapNs;
  holdBackNs_[lane] = flapping ? std::min(2 * std::max(holdBackNs_[lane], kFirstHoldBackNs), kMaxHoldBackNs)
                               : kFirstHoldBackNs;
  helper.stop();
  helper.takeUnwritten([](SendJob& j) { j.pending->fetch_sub(1, std::memory_order_release); });  // resent later
  laneState_[lane] = LaneState::Down;
  deadLanes_++;
  givenUp_++;
  if (RailCounters* c = railCountersOf(lane)) c->givenUp++;
  awaitingClose_++;
  ICN_WARN(subsys::Net, "TCP connection to %s: lane %d on %s failed (%s); its pieces move to the other lanes",
           failure_.peer().c_str(), lane, rail.c_str(), helper.failReason().c_str());
  queueLaneNotice(kChunkLaneDown, lane, 0);
  return Status::Ok;
}

Status TcpSendComm::resendLane(int lane) {
  laneState_[lane] = LaneState::Closed;
  closedAtNs_[lane] = steadyNowNs();
  awaitingClose_--;
  const uint64_t delivered = deliveredAtDown_[lane];
  Status st = Status::Ok;
  pool_.forEach([&](TcpSendRequest& r) {
    if (!r.inFlight || !r.tracked || st != Status::Ok) return;
    for (int p = 0; p < r.npieces; p++) {
      TcpSendRequest::Piece& piece = r.pieces[static_cast<size_t>(p)];
      if (piece.lane != lane) continue;
      if (piece.streamEnd != 0 && piece.streamEnd <= delivered) {
        piece.lane = 0;  // the receiver has it whole
        continue;
      }
      ChunkHeader h = r.header;
      h.flags = kChunkResend;
      h.offset = piece.offset;
      h.length = piece.length;
      piece.streamEnd = 0;
      r.pending.fetch_add(1, std::memory_order_relaxed);
      resent_++;
      const int to = liveHelper();
      if (to == 0) {
        failure_.fail(Status::RemoteError, "every helper lane failed (the last: lane " + std::to_string(lane) + ")");
        st = Status::RemoteError;
        return;
      }
      piece.lane = to;
      piece.acked = false;
      countOnRail(to, h.length);
      helpers_[static_cast<size_t>(to - 1)]->push(h, r.data + h.offset, &r.pending, &piece.streamEnd);
    }
  });
  return st;
}

// A send whose piece sits on a lane given up ICN_PEER_TIMEOUT_MS ago waits on a receiver that has neither closed
// the lane nor reported the receive whole, which an honest one does as soon as it runs: the connection fails.
bool TcpSendComm::givenUpTooLong(TcpSendRequest* r) {
  const int64_t now = steadyNowNs(), limit = static_cast<int64_t>(peerTimeout_.count()) * 1'000'000;
  for (int p = 0; p < r->npieces; p++) {
    const int lane = r->pieces[static_cast<size_t>(p)].lane;
    if (lane == 0 || laneState_[lane] != LaneState::Down || now - downAtNs_[lane] < limit) continue;
    failure_.fail(Status::RemoteError, "lane " + std::to_string(lane) + " given up " +
                                           std::to_string((now - downAtNs_[lane]) / 1'000'000) +
                                           " ms ago: the receiver neither closed it nor reported the receive whole "
                                           "(ICN_PEER_TIMEOUT_MS)");
    return true;
  }
  return false;
}

void TcpSendComm::receiveDone(uint32_t seq) {
  pool_.forEach([&](TcpSendRequest& r) {
    if (!r.inFlight || !r.tracked || !r.matched || r.header.seq != seq) return;
    for (int p = 0; p < r.npieces; p++) r.pieces[static_cast<size_t>(p)].lane = 0;  // placed: nothing to resend
  });
}

bool TcpSendComm::delivered(TcpSendRequest* r) {
  bool all = true;
  for (int p = 0; p < r->npieces; p++) {
    TcpSendRequest::Piece& piece = r->pieces[static_cast<size_t>(p)];
    if (piece.lane == 0 || piece.acked) continue;
    if (laneState_[piece.lane] != LaneState::Live) return false;  // waiting to be resent
    if (helpers_[static_cast<size_t>(piece.lane - 1)]->delivered() < piece.streamEnd) {
      all = false;
      continue;
    }
    piece.acked = true;  // not looked at again
  }
  return all;
}

}  // namespace icn::tcp
