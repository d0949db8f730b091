// Receive side: irecv posts a clear-to-send record on lane 0; pieces arrive on any lane and are checked against
// the posted receive before a byte is written (slot, sequence, index, tag, size within the posted buffer).
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <bit>
#include <new>
#include <thread>
#include <utility>

#include "core/log.h"
#include "core/params.h"
#include "transport/tcp/tcp_comm.h"

namespace icn::tcp {

Status TcpRecvRequest::test(bool* done, int* sizes) { return owner->testRequest(this, done, sizes); }

bool PieceSet::claim(uint32_t offset, uint32_t length, uint32_t total, int tag, std::string* why) {
  const uint32_t begin = offset, end = offset + length;  // validChunk: within total
  auto piece = [&] {
    return "piece [" + std::to_string(begin) + ", +" + std::to_string(length) + ") of the " + std::to_string(total) +
           "-byte message (tag " + std::to_string(tag) + ")";
  };
  if (n_ == kMax) {
    *why = "more than " + std::to_string(kMax) + " pieces of one message (" + piece() + ")";
    return false;
  }
  if (length == 0 && total > 0) {
    *why = "empty " + piece();
    return false;
  }
  int at = 0;
  while (at < n_ && ranges_[at].begin < begin) at++;
  for (int k : {at - 1, at}) {  // the neighbours: ranges are disjoint and sorted
    if (k < 0 || k >= n_) continue;
    const Range& o = ranges_[k];
    const bool same = o.begin == begin && o.end == end;
    if (same || (o.begin < end && begin < o.end)) {
      *why = piece() + (same ? " arrived twice" : " overlaps bytes [" + std::to_string(o.begin) + ", " +
                                                      std::to_string(o.end) + ") already received");
      return false;
    }
  }
  std::move_backward(ranges_.begin() + at, ranges_.begin() + n_, ranges_.begin() + n_ + 1);
  ranges_[at] = Range{begin, end};
  n_++;
  return true;
}

bool PieceSet::has(uint32_t offset, uint32_t length) const {
  for (int k = 0; k < n_; k++)
    if (ranges_[k].begin == offset && ranges_[k].end == offset + length) return true;
  return false;
}

void PieceSet::release(uint32_t offset, uint32_t length) {
  for (int k = 0; k < n_; k++) {
    if (ranges_[k].begin != offset || ranges_[k].end != offset + length) continue;
    std::move(ranges_.begin() + k + 1, ranges_.begin() + n_, ranges_.begin() + k);
    n_--;
    return;
  }
}

TcpRecvComm::TcpRecvComm(Sockets s, std::string peer, NetCommInfo info)
    : CommCore(s, std::move(peer), info),
      eagerBytes_(s.eagerBytes),
      initialCredits_((s.eagerBytes ? kEagerCredits : 0) + kEarlyCredits) {
  multiRail_ = s.railNames.size() >= 2 && s.lanes.size() >= 3;
  failover_ = multiRail_ && params::getBool(params::Id::TcpFailover);
  startMirror(s, kMirrorRecvRing);
  for (size_t i = 1; i < s.lanes.size(); i++)
    helpers_.push_back(std::make_unique<RecvHelper>(std::move(s.lanes[i]), *this, failure_, closedLanes_,
                                                    static_cast<int>(i), failover_));
  Tending::enroll(this);
}

TcpRecvComm::~TcpRecvComm() {
  Tending::leave(this);
  if (params::getInt(params::Id::LogDetail) >= 1) {
    const Helper::Waits held = helperWaits(helpers_);
    ICN_INFO(subsys::Net, "TCP connection from %s closed: %llu messages received; the helper lanes held a message "
             "that arrived before its receive %llu times, %.1f ms in all", failure_.peer().c_str(),
             static_cast<unsigned long long>(received_), static_cast<unsigned long long>(held.count), held.us / 1000.0);
    int down = 0;
    for (bool d : laneDown_) down += d;
    if (down > 0)
      ICN_INFO(subsys::Net, "TCP connection from %s: %d lane(s) given up by the sender, %llu resent piece(s) dropped "
               "as already received", failure_.peer().c_str(), down,
               static_cast<unsigned long long>(discarded_.load(std::memory_order_relaxed)));
  }
  // Stopped: nothing writes into NCCL's buffers or this comm once close returns; the threads end on their own.
  for (auto& h : helpers_) h->stop();  // all of them before any moves: a running one may poke the others
  std::vector<std::unique_ptr<Helper>> stopped;
  for (auto& h : helpers_) stopped.push_back(std::move(h));
  reaper().adopt(std::move(stopped));
}

Status TcpRecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags, void**, Request** request) {
  *request = nullptr;
  called();
  if (n < 1 || n > kMaxRecvs || !data || !sizes || !tags) {
    ICN_WARN(subsys::Net, "irecv from %s: bad arguments (n=%d, at most %d grouped receives)", failure_.peer().c_str(),
             n, kMaxRecvs);
    return Status::InvalidArgument;
  }
  if (Status st = failure_.status(); st != Status::Ok) return st;
  const size_t record = sizeof(CtsHeader) + static_cast<size_t>(n) * sizeof(CtsEntry);
  if (!roomForRecord(record)) {
    failure_.fail(Status::RemoteError, "the peer does not read lane 0: " +
                                           std::to_string(ctsQueued_ - ctsSent_.load(std::memory_order_relaxed)) +
                                           " clear-to-send records unsent, the most an honest sender leaves is " +
                                           std::to_string(kCtsBacklog));
    return Status::RemoteError;
  }
  TcpRecvRequest* r = pool_.acquire();
  if (!r) {
    ICN_WARN(subsys::Net, "irecv from %s: more than %d requests in flight", failure_.peer().c_str(), kMaxRequests);
    return Status::InvalidUsage;
  }
  std::unique_lock lk(eagerMu_);
  const uint32_t seq = nextSeq_++;
  r->owner = this;
  r->n = n;
  CtsHeader h;
  h.seq = seq;
  h.slot = static_cast<uint8_t>(pool_.indexOf(r));
  h.n = static_cast<uint8_t>(n);
  uint8_t* out = ctsOut_.data() + ctsOutLen_;  // roomForRecord made room
  for (int i = 0; i < n; i++) {
    r->bufs[i] = static_cast<uint8_t*>(data[i]);
    r->posted[i] = data[i] ? sizes[i] : 0;
    r->tags[i] = tags[i];
    r->entries[i].total.store(-1, std::memory_order_relaxed);
    r->entries[i].received.store(0, std::memory_order_relaxed);
    r->entries[i].pieces.clear();  // no lane touches a request that is not live
    CtsEntry e{tags[i], static_cast<uint32_t>(std::min<size_t>(r->posted[i], kMaxMessage))};
    memcpy(out + sizeof h + i * sizeof e, &e, sizeof e);
  }
  for (int i = 0; i < n; i++) r->eagerTaken[i] = false;
  r->live.store(uint64_t{seq} + 1);  // published: lanes may land pieces from here on
  assignEager();                     // eager messages that came before this receive
  // An honest sender is owed at most its credits of each kind; a record carries up to 255 of each, the rest wait.
  h.credits = static_cast<uint8_t>(std::min<uint32_t>(creditsOwed_, 255));
  h.earlyCredits = static_cast<uint8_t>(std::min<uint32_t>(earlyOwed_, 255));
  creditsOwed_ -= h.credits;
  earlyOwed_ -= h.earlyCredits;
  for (uint32_t k = 0; k < uint32_t{h.credits} + h.earlyCredits; k++)
    creditRecord_[creditsReturned_++ % kCreditRing] = seq;
  lk.unlock();
  if (Status st = failure_.status(); st != Status::Ok) return st;
  memcpy(out, &h, sizeof h);
  ctsOutLen_ += record;
  ctsQueuedBytes_ += record;
  ctsEnd_[ctsQueued_++ % kCtsBacklog] = ctsQueuedBytes_;
  uint64_t postedBytes = 0;
  for (int i = 0; i < n; i++) postedBytes += r->posted[i];
  r->op = watch_->monitor().onRecvPosted(tags[0], postedBytes, diagnose::nowNs());
  r->sawByte = false;
  r->bytesSeen = 0;
  r->viaHelpers.store(false, std::memory_order_relaxed);
  *request = r;
  Status st = progress();
  if (st != Status::Ok) {
    watch_->monitor().abandon(r->op);
    *request = nullptr;
  }
  return st;
}

bool TcpRecvComm::makeRoom(size_t bytes) {
  if (ctsOutLen_ + bytes > ctsOut_.size()) {  // keep only what is still unsent
    memmove(ctsOut_.data(), ctsOut_.data() + ctsOutOff_, ctsOutLen_ - ctsOutOff_);
    ctsOutLen_ -= ctsOutOff_;
    ctsOutOff_ = 0;
  }
  return ctsOutLen_ + bytes <= ctsOut_.size();
}

bool TcpRecvComm::roomForRecord(size_t bytes) {
  if (ctsQueued_ - ctsSent_.load(std::memory_order_relaxed) >= kCtsBacklog) return false;
  return makeRoom(bytes);  // always, below the backlog bound
}

bool TcpRecvComm::queueNotice(const void* record, size_t bytes) {
  if (!makeRoom(bytes)) return false;
  memcpy(ctsOut_.data() + ctsOutLen_, record, bytes);
  ctsOutLen_ += bytes;
  ctsQueuedBytes_ += bytes;
  return true;
}

Status TcpRecvComm::sendRecords() {
  if (mirror_) return sendRecordsMirrored();
  if (ctsOutOff_ == ctsOutLen_) return Status::Ok;
  bool wrote = false;
  int err = 0;
  {
    std::lock_guard lk(eagerMu_);  // see ctsSent_
    while (ctsOutOff_ < ctsOutLen_) {
      ssize_t w = ::send(lane0_.get(), ctsOut_.data() + ctsOutOff_, ctsOutLen_ - ctsOutOff_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        ctsOutOff_ += static_cast<size_t>(w);
        ctsSentBytes_ += static_cast<uint64_t>(w);
        wrote = true;
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (w < 0 && errno == EINTR) continue;
      err = w < 0 ? errno : EPIPE;
      break;
    }
    uint32_t sent = ctsSent_.load(std::memory_order_relaxed);
    while (sent != ctsQueued_ && ctsEnd_[sent % kCtsBacklog] <= ctsSentBytes_) sent++;
    ctsSent_.store(sent, std::memory_order_release);
  }
  if (err) {
    failure_.fail(Status::RemoteError, std::string("lane 0: send: ") + strerror(err));
    return Status::RemoteError;
  }
  if (ctsOutOff_ == ctsOutLen_) {
    ctsOutOff_ = ctsOutLen_ = 0;
    ctsWatch_.reset();
    return Status::Ok;
  }
  return watchRecords(wrote);
}

// An honest sender leaves few enough records unread for the socket buffers to hold them (kCtsBacklog).
Status TcpRecvComm::watchRecords(bool wrote) {
  if (!ctsWatch_.stalled(std::chrono::steady_clock::now(), true, wrote, peerTimeout_)) return Status::Ok;
  failure_.fail(Status::RemoteError,
                "the peer stopped reading lane 0: " +
                    ReadWatch::what(peerTimeout_, std::to_string(ctsQueued_ - ctsSent_.load()) +
                                                      " clear-to-send records"));
  return Status::RemoteError;
}

// Lane 0 on two rails: the queued records go into the mirror's ring (what it takes), the ring out to both copies;
// a record counts as written once either copy's socket took it whole.
Status TcpRecvComm::sendRecordsMirrored() {
  if (ctsOutOff_ == ctsOutLen_ && !mirror_->pending()) return Status::Ok;
  const uint64_t before = mirror_->sent();
  std::string why;
  Status st = Status::Ok;
  {
    std::lock_guard lk(eagerMu_);  // see ctsSent_
    for (int round = 0; round < 2 && st == Status::Ok; round++) {  // a flush may make room for the rest
      ctsOutOff_ += mirror_->append(ctsOut_.data() + ctsOutOff_, ctsOutLen_ - ctsOutOff_);
      if (mirror_->pending()) st = mirror_->flush(&why);
    }
    ctsSentBytes_ = mirror_->sent();
    uint32_t sent = ctsSent_.load(std::memory_order_relaxed);
    while (sent != ctsQueued_ && ctsEnd_[sent % kCtsBacklog] <= ctsSentBytes_) sent++;
    ctsSent_.store(sent, std::memory_order_release);
  }
  if (st != Status::Ok) {
    failure_.fail(Status::RemoteError, why);
    return Status::RemoteError;
  }
  if (ctsOutOff_ == ctsOutLen_) ctsOutOff_ = ctsOutLen_ = 0;
  if (ctsSentBytes_ == ctsQueuedBytes_) {
    ctsWatch_.reset();
    return Status::Ok;
  }
  return watchRecords(ctsSentBytes_ != before);
}

bool TcpRecvComm::recordSent(uint32_t seq) {
  if (static_cast<int32_t>(ctsSent_.load(std::memory_order_acquire) - seq) > 0) return true;
  std::lock_guard lk(eagerMu_);  // a send() answered before it returned: its count is in by now
  return static_cast<int32_t>(ctsSent_.load(std::memory_order_relaxed) - seq) > 0;
}

Status TcpRecvComm::queueDone(uint32_t seq) {
  DoneRecord d;
  d.seq = seq;
  // Room always from an honest sender: a receive completes only after its record went out, so the done records
  // waiting behind a stalled lane 0 belong to receives live when it stalled (kMaxRequests), plus the records'
  // own backlog. Past that the peer is not reading: the connection fails rather than the buffer growing.
  if (queueNotice(&d, sizeof d)) return Status::Ok;
  failure_.fail(Status::RemoteError, "the peer stopped reading lane 0 (" + std::to_string(ctsOutLen_) +
                                         " bytes of records unsent)");
  return Status::RemoteError;
}

void TcpRecvComm::queueLaneClosed(int lane) {
  LaneRecord lr;
  lr.lane = static_cast<uint32_t>(lane);
  // Room always: the records' backlog is bounded and the buffer has a lane record's room per lane besides.
  if (queueNotice(&lr, sizeof lr)) closedSent_[static_cast<size_t>(lane)] = true;
}

Status TcpRecvComm::progress() {
  for (size_t i = 0; i < helpers_.size(); i++)
    if (laneDown_[i + 1] && !closedSent_[i + 1] && helpers_[i]->retired()) queueLaneClosed(static_cast<int>(i) + 1);
  if (rejoins_.load(std::memory_order_relaxed) > 0) rejoinLanes(steadyNowNs());
  ICN_CHECK(sendRecords());
  if (!lane0Closed_) {
    bool eof = false, held = false;  // lane 0 stages eager messages: it never holds one
    std::string why;
    if (Status st = reader0_.pump(lane0In(), *this, &eof, &held, &why); st != Status::Ok) {
      reader0_.abandon(*this);
      lane0Closed_ = true;
      failure_.fail(st, mirror_ ? why : "lane 0: " + why);
      return failure_.status();
    }
    if (eof) {
      lane0Closed_ = true;
      closedLanes_.fetch_add(1);
    }
  }
  return failure_.status();
}

Status TcpRecvComm::land(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) {
  // Eager messages on helper lanes are not staged: any size a message may have.
  if (!validChunk(h, lane0 ? eagerBytes_ : kMaxMessage, why)) return Status::RemoteError;
  if (h.flags & kChunkEager) return landEager(h, lane0, out, why);
  if (h.flags & kChunkLaneDown) return handleLaneDown(h, lane0, out, why);
  if (h.flags & kChunkLaneOffer) return handleLaneOffer(h, lane0, out, why);
  const bool resend = (h.flags & kChunkResend) != 0;
  if (resend && !anyLaneDown_.load(std::memory_order_acquire)) {
    *why = "a resent piece before any lane was given up";
    return Status::RemoteError;
  }
  auto discard = [&] {  // a resent piece the receiver has already (or whose receive completed): read and dropped
    *out = Landing{};
    out->discard = true;
    out->length = h.length;
    return Status::Ok;
  };
  TcpRecvRequest& r = pool_.at(h.slot);
  // Announce ourselves before checking that the receive is live: release() clears live first and then waits
  // for users to drop to zero, so the fields read below cannot change under us.
  r.users.fetch_add(1);
  auto refuse = [&](Status st, std::string msg) {
    r.users.fetch_sub(1);
    *why = std::move(msg);
    return st;
  };
  if (r.live.load() != uint64_t{h.seq} + 1) {
    if (resend && seqRecent(h.seq)) {
      r.users.fetch_sub(1);
      return discard();
    }
    return refuse(Status::RemoteError, "data for receive " + std::to_string(h.seq) + " (slot " +
                                           std::to_string(h.slot) + "), which is not posted");
  }
  if (!recordSent(h.seq))
    return refuse(Status::RemoteError, "data for receive " + std::to_string(h.seq) +
                                           ", whose clear-to-send record was never sent");
  if (h.index >= r.n || r.tags[h.index] != h.tag)
    return refuse(Status::RemoteError, "data with tag " + std::to_string(h.tag) + " for receive " +
                                           std::to_string(h.seq) + " entry " + std::to_string(h.index) +
                                           ", which was posted with another tag or not at all");
  if (h.total > r.posted[h.index])
    return refuse(Status::InvalidUsage, "message of " + std::to_string(h.total) + " bytes (tag " +
                                            std::to_string(h.tag) + ") for a receive buffer of " +
                                            std::to_string(r.posted[h.index]) + " bytes");
  TcpRecvRequest::Entry& e = r.entries[h.index];
  {
    std::lock_guard lk(r.mu);
    const int64_t total = e.total.load(std::memory_order_relaxed);
    if (total >= 0 && total != int64_t{h.total})
      return refuse(Status::RemoteError, "pieces of one message disagree on its size (" + std::to_string(total) +
                                             " vs " + std::to_string(h.total) + " bytes)");
    if (resend && e.pieces.has(h.offset, h.length)) {
      r.users.fetch_sub(1);
      return discard();
    }
    std::string overlap;
    if (!e.pieces.claim(h.offset, h.length, h.total, h.tag, &overlap)) return refuse(Status::RemoteError, overlap);
    e.total.store(h.total, std::memory_order_release);
  }
  if (!lane0) r.viaHelpers.store(true, std::memory_order_relaxed);
  *out = Landing{};
  out->dest = r.bufs[h.index] + h.offset;
  out->slot = h.slot;
  out->index = h.index;
  out->length = h.length;
  out->offset = h.offset;
  return Status::Ok;
}

bool TcpRecvComm::seqRecent(uint32_t seq) const {
  std::lock_guard lk(eagerMu_);
  const uint32_t age = nextSeq_ - 1 - seq;  // 0: the newest receive
  return age < 4 * kMaxRequests;
}

bool TcpRecvComm::eagerTarget(int tag, uint32_t horizon, TcpRecvRequest** out, int* index) {
  // The live receive with the lowest sequence number >= horizon that has a free entry with this tag. Receives
  // may complete out of order, so the live ones can span any range of sequence numbers: look at each of them.
  TcpRecvRequest* best = nullptr;
  int bestIndex = 0;
  uint32_t bestDistance = 0;
  for (size_t slot = 0; slot < kMaxRequests; slot++) {
    TcpRecvRequest& r = pool_.at(slot);
    const uint64_t live = r.live.load();
    if (live == 0) continue;
    const uint32_t distance = static_cast<uint32_t>(live - 1) - horizon;
    if (static_cast<int32_t>(distance) < 0 || (best && distance >= bestDistance)) continue;
    for (int i = 0; i < r.n; i++) {
      if (r.tags[i] == tag && !r.eagerTaken[i] && r.entries[i].total.load() < 0) {
        best = &r;
        bestIndex = i;
        bestDistance = distance;
        break;
      }
    }
  }
  if (!best) return false;
  *out = best;
  *index = bestIndex;
  return true;
}

bool TcpRecvComm::eagerTurn(uint32_t j) const {
  const Eager& e = pending_[j];
  if (static_cast<int32_t>(static_cast<uint32_t>(eagerBase_) - e.number) <= 0) return false;  // a lower one unseen
  for (uint32_t k = 0; k < j; k++)
    if (pending_[k].tag == e.tag && !pending_[k].assigned) return false;
  return true;
}

bool TcpRecvComm::claimEager(TcpRecvRequest* r, int i, uint32_t size, std::string* why) {
  TcpRecvRequest::Entry& e = r->entries[i];
  std::lock_guard lk(r->mu);
  if (!e.pieces.empty()) {
    *why = "an eager message and data of another message (tag " + std::to_string(r->tags[i]) + ") for receive entry " +
           std::to_string(i) + " of one receive";
    return false;
  }
  if (!e.pieces.claim(0, size, size, r->tags[i], why)) return false;
  r->eagerTaken[i] = true;
  e.total.store(size, std::memory_order_release);
  return true;
}

Landing TcpRecvComm::landingFor(TcpRecvRequest* r, int i, uint32_t size) {
  Landing l;
  // An empty message is whole already: its lane only drops the header it read, and the receive owes that lane
  // nothing (it may be gone, given up while holding the message).
  if (size == 0) {
    l.discard = true;
    return l;
  }
  r->users.fetch_add(1);
  l.dest = r->bufs[i];
  l.slot = static_cast<int>(pool_.indexOf(r));
  l.index = i;
  l.length = size;
  l.eager = true;
  return l;
}

void TcpRecvComm::noteChange() {
  for (auto& h : helpers_) h->poke();
}

Status TcpRecvComm::landEager(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) {
  std::lock_guard lk(eagerMu_);
  if (out->held) {  // a helper lane asking again for the message it holds
    for (uint32_t j = 0; j < npending_; j++) {
      Eager& e = pending_[j];
      if (e.stage >= 0 || e.number != h.eager) continue;
      if (!e.assigned) return Status::Ok;  // still held
      *out = e.landing;
      std::move(pending_.begin() + j + 1, pending_.begin() + npending_, pending_.begin() + j);
      npending_--;
      earlyOwed_++;
      return Status::Ok;
    }
    *why = "held eager message " + std::to_string(h.eager) + " was lost";
    return Status::InternalError;
  }
  *out = Landing{};  // a new message: nothing of the lane's last landing carries over
  // The horizon counts the records the sender had read: only records written whole can have been.
  if (static_cast<int32_t>(ctsSent_.load(std::memory_order_relaxed) - h.seq) < 0) {
    *why = "eager message names clear-to-send record " + std::to_string(h.seq) + ", which was never sent";
    return Status::RemoteError;
  }
  const uint32_t d = h.eager - static_cast<uint32_t>(eagerBase_);
  if (static_cast<int32_t>(d) < 0 || (d < kEagerWindow && seen_[d])) {
    *why = "eager message number " + std::to_string(h.eager) + " repeated";
    return Status::RemoteError;
  }
  if (d >= kEagerWindow || npending_ == kEagerWindow) {
    *why = "more eager messages than the " + std::to_string(kEagerWindow) + " credits it was given (number " +
           std::to_string(h.eager) + ", " + std::to_string(eagerBase_) + " expected next)";
    return Status::RemoteError;
  }
  if (!creditRead(eagerBase_ + d, h.seq, why)) return Status::RemoteError;
  seen_.set(d);
  while (seen_[0]) {
    seen_ >>= 1;
    eagerBase_++;
  }
  // Kept in number order: numbers arrive out of order across lanes.
  uint32_t at = npending_;
  while (at > 0 && static_cast<int32_t>(pending_[at - 1].number - h.eager) > 0) at--;
  std::move_backward(pending_.begin() + at, pending_.begin() + npending_, pending_.begin() + npending_ + 1);
  npending_++;
  Eager& e = pending_[at];
  e = Eager{h.eager, h.tag, h.seq, h.total, -1, false, false, Landing{}};
  TcpRecvRequest* r = nullptr;
  int i = 0;
  if (eagerTurn(at) && eagerTarget(h.tag, h.seq, &r, &i)) {  // its receive is posted: straight into it
    if (h.total > r->posted[i]) {
      *why = "eager message of " + std::to_string(h.total) + " bytes (tag " + std::to_string(h.tag) +
             ") for a receive buffer of " + std::to_string(r->posted[i]) + " bytes";
      return Status::InvalidUsage;
    }
    if (!claimEager(r, i, h.total, why)) return Status::RemoteError;
    *out = landingFor(r, i, h.total);
    std::move(pending_.begin() + at + 1, pending_.begin() + npending_, pending_.begin() + at);
    npending_--;
    (lane0 ? creditsOwed_ : earlyOwed_)++;
  } else if (lane0) {
    if (freeStages_ == 0) {
      *why = "more eager messages than the " + std::to_string(kEagerCredits) + " credits it was given";
      return Status::RemoteError;
    }
    e.stage = std::countr_zero(freeStages_);
    auto& slot = stages_[static_cast<size_t>(e.stage)];
    if (!slot && eagerBytes_ > 0 && !(slot = std::unique_ptr<uint8_t[]>(new (std::nothrow) uint8_t[eagerBytes_]))) {
      *why = "no memory for an eager message's stage";
      return Status::SystemError;
    }
    freeStages_ &= ~(uint64_t{1} << e.stage);
    e.complete = h.total == 0;
    out->dest = stage(e.stage);
    out->slot = -1 - e.stage;
    out->index = 0;
    out->length = h.total;
  } else {
    out->held = true;  // left in the socket until its receive is posted
  }
  assignEager();  // later messages may have waited for this number
  const Status st = failure_.status();
  // A land() that fails hands out no landing: its lane stops without reading the payload, so nothing would
  // ever call landed() for one, and release() would wait for its count forever. (*out started empty: only a
  // landing into a receive is marked eager.)
  if (st != Status::Ok && out->eager) {
    landed(*out, false);
    *out = Landing{};
  }
  return st;
}

bool TcpRecvComm::creditRead(uint64_t n, uint32_t horizon, std::string* why) const {
  if (n < initialCredits_) return true;  // one the sender started with
  // Credits come back only in records, so the sender had this one only if it read the record that carried it:
  // a sender that reads no records gets no more than it started with, whatever it claims.
  const uint64_t c = n - initialCredits_;
  if (c >= creditsReturned_) {
    *why = "eager message " + std::to_string(n) + " spends a credit that was never handed back (" +
           std::to_string(creditsReturned_) + " handed back, " + std::to_string(initialCredits_) + " to start with)";
    return false;
  }
  // Never for an honest sender: n >= eagerBase_ and creditsReturned_ < eagerBase_ + kEagerWindow.
  if (creditsReturned_ - c > kCreditRing) {
    *why = "eager message " + std::to_string(n) + " spends a credit handed back too long ago";
    return false;
  }
  const uint32_t record = creditRecord_[c % kCreditRing];
  if (static_cast<int32_t>(horizon - record) <= 0) {
    *why = "eager message " + std::to_string(n) + " spends a credit handed back in clear-to-send record " +
           std::to_string(record) + ", which it had not read (horizon " + std::to_string(horizon) + ")";
    return false;
  }
  return true;
}

void TcpRecvComm::assignEager() {
  bool changed = false;
  for (uint32_t j = 0; j < npending_;) {
    Eager& e = pending_[j];
    TcpRecvRequest* r = nullptr;
    int i = 0;
    if (e.assigned || (e.stage >= 0 && !e.complete) || !eagerTurn(j) || !eagerTarget(e.tag, e.horizon, &r, &i)) {
      j++;
      continue;
    }
    if (e.size > r->posted[i]) {
      failure_.fail(Status::InvalidUsage, "eager message of " + std::to_string(e.size) + " bytes (tag " +
                                              std::to_string(e.tag) + ") for a receive buffer of " +
                                              std::to_string(r->posted[i]) + " bytes");
      break;
    }
    std::string why;
    if (!claimEager(r, i, e.size, &why)) {
      failure_.fail(Status::RemoteError, why);
      break;
    }
    changed = true;
    if (e.stage < 0) {  // the holding lane takes it from here
      e.landing = landingFor(r, i, e.size);
      e.assigned = true;
      j++;
      continue;
    }
    if (e.size) memcpy(r->bufs[i], stage(e.stage), e.size);
    r->entries[i].received.store(e.size, std::memory_order_release);  // complete: every byte is in
    creditsOwed_++;
    freeStages_ |= uint64_t{1} << e.stage;
    std::move(pending_.begin() + j + 1, pending_.begin() + npending_, pending_.begin() + j);
    npending_--;
  }
  if (changed) noteChange();
}

void TcpRecvComm::landed(const Landing& l, bool arrived) {
  if (l.discard) {
    if (l.length > 0) discarded_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (l.slot < 0) {  // an eager message into the stage: it may now go to its receive
    std::lock_guard lk(eagerMu_);
    for (uint32_t j = 0; j < npending_; j++)
      if (pending_[j].stage == -1 - l.slot) pending_[j].complete = arrived;
    if (arrived) assignEager();
    return;
  }
  TcpRecvRequest& r = pool_.at(static_cast<size_t>(l.slot));
  if (arrived) {
    r.entries[l.index].received.fetch_add(l.length, std::memory_order_release);
  } else if (!l.eager) {  // cut short: its bytes come again, resent
    std::lock_guard lk(r.mu);
    r.entries[l.index].pieces.release(l.offset, l.length);
  }
  r.users.fetch_sub(1, std::memory_order_release);
}

void TcpRecvComm::release(TcpRecvRequest* r) {
  r->live.store(0);
  while (r->users.load() != 0) std::this_thread::yield();  // a lane between its last byte and landed()
  pool_.release(r);
}

// A receive's first byte as NCCL's polling sees it (the first piece's header landed: its total is known), and its
// bytes so far while they move, for the diagnosis.
void TcpRecvComm::noteArrival(TcpRecvRequest* r) {
  uint64_t got = 0;
  bool started = false;
  for (int i = 0; i < r->n; i++) {
    started |= r->entries[i].total.load(std::memory_order_relaxed) >= 0;
    got += r->entries[i].received.load(std::memory_order_relaxed);
  }
  if (!started || (r->sawByte && got == r->bytesSeen)) return;
  const uint64_t now = diagnose::nowNs();
  if (!r->sawByte) watch_->monitor().onFirstByte(r->op, now);
  r->sawByte = true;
  if (got != r->bytesSeen) watch_->monitor().progress(r->op, got, now);
  r->bytesSeen = got;
}

Status TcpRecvComm::testRequest(TcpRecvRequest* r, bool* done, int* sizes) {
  *done = false;
  called();
  if (!pool_.owns(r) || r->live.load(std::memory_order_relaxed) == 0) return Status::InvalidArgument;
  auto complete = [&] {
    for (int i = 0; i < r->n; i++) {
      int64_t t = r->entries[i].total.load(std::memory_order_acquire);
      if (t < 0 || r->entries[i].received.load(std::memory_order_acquire) != uint64_t(t)) return false;
    }
    return true;
  };
  if (!complete()) {
    ICN_CHECK(progress());
    // Read before the second look: a lane counts its end of stream only after landing everything before it.
    const bool allClosed = closedLanes_.load() == static_cast<int>(helpers_.size()) + 1;
    if (!complete()) {
      noteArrival(r);
      return checkPeer(allClosed, static_cast<int>(pool_.inUse()));
    }
  }
  uint64_t bytes = 0;
  for (int i = 0; i < r->n; i++) {
    int64_t t = r->entries[i].total.load(std::memory_order_relaxed);
    if (sizes) sizes[i] = static_cast<int>(t);
    bytes += uint64_t(t);
  }
  counters_->add(bytes);
  received_ += static_cast<uint64_t>(r->n);
  const uint64_t now = diagnose::nowNs();
  if (!r->sawByte) watch_->monitor().onFirstByte(r->op, now);
  watch_->monitor().onRecvDone(r->op, bytes, now);
  // With failover, a sender that gave up a lane waits for its lane-closed record, which this receiver, done, may
  // not send until those very sends complete (its next receive can wait on them): it hears the receive is whole.
  const bool tellDone = failover_ && r->viaHelpers.load(std::memory_order_acquire);
  const uint32_t seq = static_cast<uint32_t>(r->live.load(std::memory_order_relaxed) - 1);
  release(r);
  *done = true;
  if (tellDone) {
    ICN_CHECK(queueDone(seq));
    ICN_CHECK(sendRecords());
  }
  return Status::Ok;
}

}  // namespace icn::tcp
