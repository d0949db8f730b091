// Send side: sends queue until the receiver's clear-to-send record with their tag arrives on lane 0, then go
// out whole on lane 0 (small) or split across the helper lanes (large).
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <bit>

#include "core/log.h"
#include "core/params.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_paths.h"
#include "transport/tcp/tcp_split.h"

namespace icn::tcp {

Status TcpSendRequest::test(bool* done, int* sizes) {
  Status st = owner->testRequest(this, done);
  if (st == Status::Ok && *done && sizes) sizes[0] = static_cast<int>(size);
  return st;
}

TcpSendComm::TcpSendComm(Sockets s, std::string peer, NetCommInfo info)
    : CommCore(s, std::move(peer), info), eagerBytes_(s.eagerBytes), credits_(s.eagerBytes ? kEagerCredits : 0) {
  laneRail_ = s.laneRail;
  railNames_ = s.railNames;
  laneRail_.resize(s.lanes.size(), 0);
  if (railNames_.empty()) railNames_.push_back("?");
  for (const std::string& name : railNames_)  // "eth1 -> 10.0.1.2": counted by interface
    railCounters_.push_back(railNames_.size() > 1 ? netstats::railCounters(name.substr(0, name.find(' '))) : nullptr);
  // Pieces can move to another lane only when there is another rail, and no message is held in a lane's socket.
  failover_ = railNames_.size() >= 2 && s.lanes.size() >= 3 && params::getBool(params::Id::TcpFailover) &&
              tuning_.laneEagerBytes == 0;
  laneStall_ = std::chrono::milliseconds(params::getInt(params::Id::TcpLaneStallMs));
  wireOn_ = params::getInt(params::Id::StragglerReportS) > 0;  // only the straggler check reads the wire measure
  startMirror(s, kMirrorSendRing);
  copyRail_ = s.lane0CopyRail;
  for (size_t i = 1; i < s.lanes.size(); i++) helpers_.push_back(makeHelper(std::move(s.lanes[i]), static_cast<int>(i)));
  // Path failures recorded before this connection (tcp_paths.h) say nothing of its lanes, which just connected.
  pathGen_ = paths().generation();
  lastAckNs_.fill(steadyNowNs());
  Tending::enroll(this);
}

std::unique_ptr<SendHelper> TcpSendComm::makeHelper(Fd fd, int lane) {
  return std::make_unique<SendHelper>(std::move(fd), failure_, lane, peerTimeout_, failover_);
}

RailCounters* TcpSendComm::railCountersOf(int lane) const {
  return railCounters_[static_cast<size_t>(laneRail_[static_cast<size_t>(lane)])].get();
}

const std::string& TcpSendComm::railNameOf(int lane) const {
  return railNames_[static_cast<size_t>(laneRail_[static_cast<size_t>(lane)])];
}

TcpSendComm::~TcpSendComm() {
  Tending::leave(this);
  if (params::getInt(params::Id::LogDetail) >= 1) {
    const Helper::Waits full = helperWaits(helpers_);
    ICN_INFO(subsys::Net, "TCP connection to %s closed: %llu messages sent, %llu eager (<= %u bytes, before the "
             "clear-to-send), %llu early (<= %zu bytes, before the clear-to-send, whole on a helper lane; at most %d of %d "
             "lanes at once), %llu whole on lane 0, %llu split over %zu helper lanes; %llu large ones waited for an eager "
             "credit; the helper lanes waited for socket space %llu times, %.1f ms in all", failure_.peer().c_str(),
             static_cast<unsigned long long>(sentEager_ + sentEarly_ + sentLane0_ + sentSplit_),
             static_cast<unsigned long long>(sentEager_), eagerBytes_, static_cast<unsigned long long>(sentEarly_),
             tuning_.laneEagerBytes, earlyLanesPeak_,
             std::min(tuning_.earlyLanes, static_cast<int>(helpers_.size())), static_cast<unsigned long long>(sentLane0_),
             static_cast<unsigned long long>(sentSplit_), helpers_.size(), static_cast<unsigned long long>(waitedCredit_),
             static_cast<unsigned long long>(full.count), full.us / 1000.0);
    if (railNames_.size() > 1)
      ICN_INFO(subsys::Net, "TCP connection to %s closed: %s; failover %s, lanes given up %llu times, %llu piece(s) "
               "resent, lanes back %llu times; lane 0 on %d rail(s) at close, back %llu times",
               failure_.peer().c_str(), railShares().c_str(), failover_ ? "on" : "off",
               static_cast<unsigned long long>(givenUp_), static_cast<unsigned long long>(resent_),
               static_cast<unsigned long long>(rejoined_), mirror_ ? mirror_->liveCopies() : 1,
               static_cast<unsigned long long>(copiesBack_));
  }
  // Stopped before the requests they point into go away; the threads end on their own.
  for (auto& h : helpers_) h->stop();  // all of them before any moves: a running one may poke the others
  std::vector<std::unique_ptr<Helper>> stopped;
  for (auto& h : helpers_) stopped.push_back(std::move(h));
  reaper().adopt(std::move(stopped));
  // Unread clear-to-send bytes would make close() reset the connection, and a reset can destroy data the peer
  // has not read yet: read them first.
  if (mirror_) {
    mirror_->drain();
  } else {
    uint8_t sink[4096];
    while (!lane0Closed_ && ::recv(lane0_.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  }
}

Status TcpSendComm::isend(void* data, size_t size, int tag, void* mhandle, Request** request) {
  *request = nullptr;
  called();
  if (size > 0 && !data) {
    ICN_WARN(subsys::Net, "isend to %s: %zu bytes from a null buffer", failure_.peer().c_str(), size);
    return Status::InvalidArgument;
  }
  if (size > kMaxMessage) {
    ICN_WARN(subsys::Net, "isend to %s: %zu bytes exceed the %u-byte message limit", failure_.peer().c_str(), size,
             kMaxMessage);
    return Status::InvalidArgument;
  }
  if (Status st = failure_.status(); st != Status::Ok) return st;
  TcpSendRequest* r = pool_.acquire();
  if (!r) return Status::Ok;  // every request in flight: NCCL retries
  r->owner = this;
  r->data = static_cast<const uint8_t*>(data);
  r->size = static_cast<uint32_t>(size);
  r->tag = tag;
  r->matched = false;
  r->pending.store(0, std::memory_order_relaxed);
  r->tracked = false;
  r->npieces = 0;
  r->inFlight = true;
  diagnose::LinkMonitor& m = watch_->monitor();
  const uint64_t postedNs = diagnose::nowNs();
  r->op = m.onSendPosted(tag, size, postedNs);
  *request = r;
  if (sendEager(r)) {
    m.onClearToSend(r->op, postedNs);  // it leaves now: no clear-to-send to wait for
    Status st = flushLane0();
    if (st != Status::Ok) {
      m.abandon(r->op);
      *request = nullptr;
    }
    return st;
  }
  if (Status st = failure_.status(); st != Status::Ok) {
    m.abandon(r->op);
    *request = nullptr;
    return st;
  }
  queue_[queued_++] = r;
  Status st = progress();
  if (st != Status::Ok) {  // the connection failed; the request dies with the comm
    m.abandon(r->op);
    *request = nullptr;
  }
  return st;
}

Status TcpSendComm::progress() {
  if (wireOn_ || failover_) {
    const int64_t now = steadyNowNs();
    lookAtLanes(now);
    if (failover_) ICN_CHECK(checkLanes(now));
  }
  if (mirror_ && mirror_->liveCopies() < 2) ICN_CHECK(rejoinCopies(steadyNowNs()));
  ICN_CHECK(match());  // with the records already read: no system call when they suffice
  if (queued_ > 0 || awaitingClose_ > 0) {  // sends waiting for their records, or lanes for the receiver's close
    ICN_CHECK(readCts());
    ICN_CHECK(match());
  }
  return flushLane0();
}

// Reads clear-to-send records in bulk and parses every complete one.
Status TcpSendComm::readCts() {
  while (!lane0Closed_) {
    const size_t room = sizeof ctsIn_ - ctsGot_;
    size_t n = 0;
    bool closed = false;
    std::string why;
    if (lane0In().read(ctsIn_ + ctsGot_, room, &n, &closed, &why) != Status::Ok) {
      failure_.fail(Status::RemoteError, mirror_ ? why : "lane 0: " + why);
      return Status::RemoteError;
    }
    if (closed) {
      lane0Closed_ = true;
      break;
    }
    if (n == 0) break;
    ctsGot_ += static_cast<size_t>(n);
    size_t off = 0;
    while (ctsGot_ - off >= sizeof(CtsHeader)) {
      CtsHeader h;
      memcpy(&h, ctsIn_ + off, sizeof h);
      if (h.magic == kLaneMagic) {  // the receiver closed a lane we gave up: its pieces go again
        LaneRecord lr;
        memcpy(&lr, ctsIn_ + off, sizeof lr);
        const bool ours = lr.reserved == 0 && lr.lane >= 1 && lr.lane <= helpers_.size() &&
                          laneState_[lr.lane] == LaneState::Down;
        if (!ours) {
          failure_.fail(Status::RemoteError, "lane-closed record for lane " + std::to_string(lr.lane) +
                                                 ", which this sender did not give up");
          return Status::RemoteError;
        }
        off += sizeof lr;
        ICN_CHECK(resendLane(static_cast<int>(lr.lane)));
        continue;
      }
      if (h.magic == kDoneMagic) {  // a receive is whole: its sends wait for nothing more
        DoneRecord d;
        memcpy(&d, ctsIn_ + off, sizeof d);
        const uint32_t age = ctsTail_ - 1 - d.seq;  // 0: the latest record read
        if (d.reserved != 0 || ctsTail_ == 0 || age >= kCtsRing) {
          failure_.fail(Status::RemoteError, "receive-done record for receive " + std::to_string(d.seq) +
                                                 ", whose clear-to-send this sender has not read");
          return Status::RemoteError;
        }
        off += sizeof d;
        receiveDone(d.seq);
        continue;
      }
      std::string why;
      if (!validCts(h, ctsTail_, &why)) {
        failure_.fail(Status::RemoteError, why);
        return Status::RemoteError;
      }
      if (ctsTail_ - ctsHead_ >= kMaxUnsentRecords) {
        failure_.fail(Status::RemoteError, "more than " + std::to_string(kMaxRequests) + " receives posted at once");
        return Status::RemoteError;
      }
      const size_t record = sizeof h + h.n * sizeof(CtsEntry);
      if (ctsGot_ - off < record) break;
      if (credits_ + h.credits > kEagerCredits || earlyCredits_ + h.earlyCredits > kEarlyCredits) {
        failure_.fail(Status::RemoteError, "clear-to-send record hands back more eager credits than were spent");
        return Status::RemoteError;
      }
      credits_ += h.credits;
      earlyCredits_ += h.earlyCredits;
      Cts& c = cts_[ctsTail_ % kCtsRing];
      c.h = h;
      memcpy(c.e, ctsIn_ + off + sizeof h, h.n * sizeof(CtsEntry));
      c.used = 0;
      ctsTail_++;
      off += record;
    }
    memmove(ctsIn_, ctsIn_ + off, ctsGot_ - off);
    ctsGot_ -= off;
    if (static_cast<size_t>(n) < room) break;  // short read: the socket is empty
  }
  return Status::Ok;
}

bool TcpSendComm::sendEager(TcpSendRequest* r) {
  // Never overtake a queued send, and never write on a lane before the receiver has (tcp_transport.cc).
  const bool small = r->size <= eagerBytes_;
  const bool large = !small && !helpers_.empty() && r->size <= tuning_.laneEagerBytes;
  if (!(small || large) || queued_ > 0 || ctsTail_ == 0) return false;
  if (match() != Status::Ok) return false;                 // debts first, with the records already read
  // A large message goes eager only when the receiver is behind: a record already here sends it the normal
  // way, split across the helper lanes.
  if ((large || credits_ <= kEagerCredits / 2) && (readCts() != Status::Ok || match() != Status::Ok)) return false;
  // Only a message that can belong to no record we have read may go ahead of its record: then the receiver
  // and we place it by the same rule.
  if (ctsHead_ != ctsTail_) return false;
  uint32_t& credits = large ? earlyCredits_ : credits_;
  if (credits == 0 || ndebts_ == kEagerWindow) {
    if (large) waitedCredit_++;
    return false;
  }
  // The receiver may hold a helper lane on a large one until its receive is posted: while one is unresolved,
  // every eager message has its tag, so nothing held waits for a receive that the application posts only
  // after another tag's message completes.
  if (large || heldTotal_ > 0)
    for (uint32_t d = 0; d < ndebts_; d++)
      if (debts_[d].tag != r->tag) return false;
  const int lane = large ? earlyLane() : 0;
  credits--;
  (large ? sentEarly_ : sentEager_)++;
  debts_[ndebts_++] = Debt{r->tag, lane, lane0Tail_};
  ChunkHeader h;
  h.flags = kChunkEager;
  h.seq = ctsTail_;
  h.tag = r->tag;
  h.total = h.length = r->size;
  h.eager = eagerSent_++;
  r->matched = true;
  r->pending.store(1, std::memory_order_relaxed);
  if (lane > 0) {
    if (heldOn_[lane] == 0) earlyLanesPeak_ = std::max(earlyLanesPeak_, ++holdingLanes_);
    heldOn_[lane]++;
    heldTotal_++;
    helpers_[lane - 1]->push(h, r->data, &r->pending);
    return true;
  }
  SendJob& j = lane0Jobs_[lane0Tail_++ % lane0Jobs_.size()];
  j.header = h;
  j.data = r->data;
  j.pending = &r->pending;
  j.sent = 0;
  j.early = 1;  // until its record is read
  return true;
}

int TcpSendComm::cleanHelper() {
  const size_t nh = helpers_.size();
  for (size_t k = 0; k < nh; k++) {
    const int lane = 1 + static_cast<int>(nextHelper_++ % nh);
    if (heldOn_[lane] == 0) return lane;
  }
  return -1;
}

int TcpSendComm::earlyLane() {
  // Each lane carries its eager messages in eager-number order, so the lowest unplaced number is always at the
  // head of its lane and no held lane waits for a header queued behind another held message (tcp_wire.h).
  const size_t nh = helpers_.size();
  if (holdingLanes_ < tuning_.earlyLanes)
    if (int lane = cleanHelper(); lane > 0) return lane;
  int best = -1;
  for (size_t k = 0; k < nh; k++) {
    const int lane = 1 + static_cast<int>((nextHelper_ + k) % nh);
    if (heldOn_[lane] > 0 && (best < 0 || heldOn_[lane] < heldOn_[best])) best = lane;
  }
  nextHelper_++;
  return best;
}

Status TcpSendComm::match() {
  while (ctsHead_ != ctsTail_) {
    Cts& c = cts_[ctsHead_ % kCtsRing];
    auto full = [&] { return std::popcount(c.used) == c.h.n; };
    auto freeEntry = [&](int tag) {
      for (int i = 0; i < c.h.n; i++)
        if (!(c.used & (1u << i)) && c.e[i].tag == tag) return i;
      return -1;
    };
    // Eager messages already sent take the first free entries with their tags, oldest first.
    for (uint32_t d = 0; d < ndebts_ && !full();) {
      int idx = freeEntry(debts_[d].tag);
      if (idx < 0) {
        d++;
        continue;
      }
      c.used |= 1u << idx;
      // Its receive is posted: the receiver must read it now, and a helper lane that held it is free again.
      if (const int lane = debts_[d].lane; lane > 0) {
        holdingLanes_ -= --heldOn_[lane] == 0;
        heldTotal_--;
        helpers_[static_cast<size_t>(lane - 1)]->earlyResolved();
      } else if (debts_[d].job >= lane0Head_) {
        lane0Jobs_[debts_[d].job % lane0Jobs_.size()].early = 0;
      }
      std::move(debts_.begin() + d + 1, debts_.begin() + ndebts_, debts_.begin() + d);
      ndebts_--;
    }
    for (int k = 0; k < queued_ && !full(); k++) {
      TcpSendRequest* r = queue_[k];
      int idx = freeEntry(r->tag);
      if (idx < 0) continue;  // belongs to a later receive
      ICN_CHECK(post(r, c, idx));
      std::move(queue_.begin() + k + 1, queue_.begin() + queued_, queue_.begin() + k);
      queued_--;
      k--;
      c.used |= 1u << idx;
    }
    if (!full()) break;  // the remaining entries wait for sends with their tags
    ctsHead_++;
  }
  return Status::Ok;
}

Status TcpSendComm::post(TcpSendRequest* r, const Cts& cts, int index) {
  const CtsEntry& e = cts.e[index];
  if (r->size > e.size) {
    failure_.fail(Status::InvalidUsage, "isend of " + std::to_string(r->size) + " bytes (tag " +
                                            std::to_string(r->tag) + ") exceeds the " + std::to_string(e.size) +
                                            " bytes the receiver posted");
    return Status::InvalidUsage;
  }
  ChunkHeader h;
  h.seq = cts.h.seq;
  h.slot = cts.h.slot;
  h.index = static_cast<uint8_t>(index);
  h.tag = r->tag;
  h.total = r->size;
  r->matched = true;
  watch_->monitor().onClearToSend(r->op, diagnose::nowNs());
  // Pieces never queue behind an unresolved eager message on a helper lane (tcp_wire.h): they take the clean
  // lanes, or lane 0 when none is.
  const size_t nh = helpers_.size();
  std::array<int, kMaxLanes> clean{};
  size_t nclean = 0;
  if (r->size > tuning_.inlineBytes) {
    for (size_t k = 0; k < nh; k++) {
      const int lane = 1 + static_cast<int>((nextHelper_ + k) % nh);
      if (heldOn_[lane] == 0 && laneState_[lane] == LaneState::Live) clean[nclean++] = lane;
    }
  }
  if (nclean == 0) {
    sentLane0_++;
    r->pending.store(1, std::memory_order_relaxed);
    h.length = r->size;
    SendJob& j = lane0Jobs_[lane0Tail_++ % lane0Jobs_.size()];
    j.header = h;
    j.data = r->data;
    j.pending = &r->pending;
    j.sent = 0;
    j.early = 0;
    return Status::Ok;
  }
  sentSplit_++;
  std::array<size_t, kMaxLanes> sizes{};
  const size_t pieces = splitByRate(r->size, clean, nclean, sizes);
  nextHelper_ += static_cast<unsigned>(pieces);
  r->pending.store(static_cast<int>(pieces), std::memory_order_relaxed);
  r->tracked = failover_;
  r->header = h;
  r->npieces = static_cast<int>(pieces);
  size_t offset = 0;
  for (size_t p = 0; p < pieces; p++) {
    h.offset = static_cast<uint32_t>(offset);
    h.length = static_cast<uint32_t>(sizes[p]);
    r->pieces[p] = TcpSendRequest::Piece{clean[p], h.offset, h.length, 0};
    countOnRail(clean[p], h.length);
    helpers_[clean[p] - 1]->push(h, r->data + h.offset, &r->pending, failover_ ? &r->pieces[p].streamEnd : nullptr);
    offset += sizes[p];
  }
  return Status::Ok;
}

void TcpSendComm::countOnRail(int lane, uint64_t bytes) {
  if (RailCounters* c = railCountersOf(lane)) c->bytes.fetch_add(bytes, std::memory_order_relaxed);
}

int TcpSendComm::liveHelper() {
  const size_t nh = helpers_.size();
  for (size_t k = 0; k < nh; k++) {
    const int lane = 1 + static_cast<int>(nextHelper_++ % nh);
    if (heldOn_[lane] == 0 && laneState_[lane] == LaneState::Live) return lane;
  }
  return 0;
}

std::string TcpSendComm::railShares() const {
  std::vector<uint64_t> bytes(railNames_.size(), 0);
  std::vector<int> lanes(railNames_.size(), 0);
  uint64_t total = 0;
  for (size_t i = 0; i < helpers_.size(); i++) {
    const size_t rail = static_cast<size_t>(laneRail_[i + 1]);
    const uint64_t sent = bytesOfFormerHelpers_[i + 1] + helpers_[i]->bytesSent();  // over the lane's whole life
    bytes[rail] += sent;
    lanes[rail]++;
    total += sent;
  }
  const std::vector<double> rates = railRates(false);
  std::string out;
  char buf[160];
  for (size_t k = 0; k < railNames_.size(); k++) {
    if (lanes[k] == 0) continue;
    snprintf(buf, sizeof buf, "%s carried %.0f%% of the helper lanes' bytes (%d lane%s, %.1f MB/s per lane)",
             railNames_[k].c_str(), total ? 100.0 * static_cast<double>(bytes[k]) / static_cast<double>(total) : 0.0,
             lanes[k], lanes[k] == 1 ? "" : "s", rates[k] / 1e6);
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  return out;
}

std::vector<double> TcpSendComm::railRates(bool probed) const {
  const auto now = std::chrono::steady_clock::now();
  std::vector<double> sum(railNames_.size(), 0.0);
  std::vector<int> n(railNames_.size(), 0);
  for (size_t i = 0; i < helpers_.size(); i++) {
    if (laneState_[i + 1] != LaneState::Live) continue;
    const double r = probed ? helpers_[i]->rate(now) : helpers_[i]->measuredRate();
    if (r <= 0) continue;
    const size_t rail = static_cast<size_t>(laneRail_[i + 1]);
    sum[rail] += r;
    n[rail]++;
  }
  for (size_t k = 0; k < sum.size(); k++) sum[k] = n[k] ? sum[k] / n[k] : 0.0;
  return sum;
}

size_t TcpSendComm::splitByRate(size_t size, std::array<int, kMaxLanes>& lanes, size_t n,
                                std::array<size_t, kMaxLanes>& sizes) {
  std::array<SplitCandidate, kMaxLanes> c{};
  const bool rails = railNames_.size() > 1;
  // A lane weighs what its rail moves per lane; a rail not measured yet weighs like the fastest one, so it gets work
  // and a measure. One rail: equal pieces, the lanes in their round-robin order.
  const std::vector<double> rates = rails ? railRates() : std::vector<double>{};
  const double top = rails ? std::max(1.0, *std::max_element(rates.begin(), rates.end())) : 1.0;
  const double share = static_cast<double>(size) / static_cast<double>(n);
  for (size_t k = 0; k < n; k++) {
    const int rail = laneRail_[static_cast<size_t>(lanes[k])];
    const double r = rails ? rates[static_cast<size_t>(rail)] : 1.0;
    c[k] = SplitCandidate{lanes[k], rail, r > 0 ? r : top};
    if (!rails) continue;
    // What the lane still holds (handed, not yet acknowledged): it would be done with a share after that.
    const SendHelper& helper = *helpers_[static_cast<size_t>(lanes[k] - 1)];
    const uint64_t acked = helper.delivered();
    c[k].holds = helper.pushed() > acked ? static_cast<double>(helper.pushed() - acked) : 0.0;
  }
  // The lanes that would finish first come first (stable: equal ones keep their round-robin order), so a message of
  // one piece goes to whichever rail is free, not always to the one measured fastest.
  std::array<size_t, kMaxLanes> order{};
  for (size_t k = 0; k < n; k++) order[k] = k;
  if (rails)
    std::stable_sort(order.begin(), order.begin() + static_cast<long>(n),
                     [&](size_t a, size_t b) {
                       return (c[a].holds + share) / c[a].weight < (c[b].holds + share) / c[b].weight;
                     });
  std::array<SplitCandidate, kMaxLanes> sorted{};
  for (size_t k = 0; k < n; k++) sorted[k] = c[order[k]];
  const size_t pieces = splitOverRails(size, tuning_.chunkBytes, sorted.data(), n, sizes.data());
  for (size_t k = 0; k < pieces; k++) lanes[k] = sorted[k].lane;
  return pieces;
}

Status TcpSendComm::flushLane0() {
  if (mirror_) return flushMirrored();
  while (lane0Head_ != lane0Tail_) {
    SendJob& j = lane0Jobs_[lane0Head_ % lane0Jobs_.size()];
    bool done = false;
    std::string why;
    const size_t before = j.sent;
    if (writeSome(lane0_.get(), j, &done, &why) != Status::Ok) {
      failure_.fail(Status::RemoteError, "lane 0: " + why);
      return Status::RemoteError;
    }
    if (!done) {
      if (lane0Watch_.stalled(std::chrono::steady_clock::now(), j.early == 0, j.sent != before, peerTimeout_)) {
        failure_.fail(Status::RemoteError,
                      "the peer stopped reading lane 0: " + ReadWatch::what(peerTimeout_, "a message whose receive it posted"));
        return Status::RemoteError;
      }
      return Status::Ok;
    }
    lane0Watch_.reset();
    if (j.pending) j.pending->fetch_sub(1, std::memory_order_release);
    lane0Head_++;
  }
  return Status::Ok;
}

// Lane 0 on two rails: the jobs' bytes go into the mirror's ring in order (as much as it takes), the ring out to
// both copies; a job is done once either copy's socket took it whole (the ring keeps it for the other).
Status TcpSendComm::flushMirrored() {
  constexpr size_t kHeader = sizeof(ChunkHeader);
  const uint64_t before = mirror_->sent();
  for (int round = 0; round < 2; round++) {  // a flush may make room for the rest
    while (lane0Handed_ != lane0Tail_) {
      SendJob& j = lane0Jobs_[lane0Handed_ % kLane0Jobs];
      const size_t total = kHeader + j.header.length;
      while (j.sent < total) {
        const uint8_t* from = j.sent < kHeader ? reinterpret_cast<const uint8_t*>(&j.header) + j.sent
                                               : j.data + (j.sent - kHeader);
        const size_t want = j.sent < kHeader ? kHeader - j.sent : total - j.sent;
        const size_t took = mirror_->append(from, want);
        j.sent += took;
        if (took < want) break;
      }
      if (j.sent < total) break;
      lane0End_[lane0Handed_ % kLane0Jobs] = mirror_->queued();
      lane0Handed_++;
    }
    std::string why;
    if (mirror_->pending() && mirror_->flush(&why) != Status::Ok) {
      failure_.fail(Status::RemoteError, why);
      return Status::RemoteError;
    }
  }
  while (lane0Head_ != lane0Handed_ && lane0End_[lane0Head_ % kLane0Jobs] <= mirror_->sent()) {
    SendJob& j = lane0Jobs_[lane0Head_ % kLane0Jobs];
    if (j.pending) j.pending->fetch_sub(1, std::memory_order_release);
    lane0Head_++;
    lane0Watch_.reset();
  }
  if (lane0Head_ == lane0Tail_) return Status::Ok;
  const SendJob& head = lane0Jobs_[lane0Head_ % kLane0Jobs];
  if (lane0Watch_.stalled(std::chrono::steady_clock::now(), head.early == 0, mirror_->sent() != before, peerTimeout_)) {
    failure_.fail(Status::RemoteError,
                  "the peer stopped reading lane 0: " + ReadWatch::what(peerTimeout_, "a message whose receive it posted"));
    return Status::RemoteError;
  }
  return Status::Ok;
}

Status TcpSendComm::testRequest(TcpSendRequest* r, bool* done) {
  *done = false;
  called();
  if (!pool_.owns(r)) return Status::InvalidArgument;
  auto finished = [&] {
    return r->matched && r->pending.load(std::memory_order_acquire) == 0 && (!r->tracked || delivered(r));
  };
  if (!finished()) {
    if (Status st = progress(); st != Status::Ok) return st;
    if (!finished()) {
      if (awaitingClose_ > 0 && r->tracked && r->matched && givenUpTooLong(r)) return failure_.status();
      return checkPeer(lane0Closed_, static_cast<int>(pool_.inUse()));
    }
  }
  r->inFlight = false;
  counters_->add(r->size);
  watch_->monitor().onSendDone(r->op, r->size, diagnose::nowNs());
  r->matched = false;
  pool_.release(r);
  *done = true;
  return Status::Ok;
}

}  // namespace icn::tcp
