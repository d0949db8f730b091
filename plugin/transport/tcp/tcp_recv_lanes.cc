// Receive side, failover and recovery: the sender's lane-down and lane-offer headers (a helper lane, or lane 0's
// copy), and joining an offered lane again from its own end.
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/log.h"
#include "transport/tcp/tcp_comm.h"

namespace icn::tcp {

Status TcpRecvComm::handleLaneDown(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) {
  const size_t lane = h.slot;  // validChunk: 1 .. kMaxLanes
  // Only a connection over two or more rails fails over (the sender's own rule, whatever its setting).
  if (!lane0 || !multiRail_ || lane > helpers_.size() || laneDown_[lane]) {
    *why = "lane-down for lane " + std::to_string(lane) + (lane0 ? "" : " on a helper lane") +
           ", which is not a live helper lane";
    return Status::RemoteError;
  }
  laneDown_[lane] = true;
  anyLaneDown_.store(true, std::memory_order_release);
  ICN_INFO(subsys::Net, "TCP connection with %s: the sender gave up lane %zu; its pieces come again on the others",
           failure_.peer().c_str(), lane);
  helpers_[lane - 1]->retire();
  *out = Landing{};
  out->discard = true;  // no payload
  return Status::Ok;
}

Status TcpRecvComm::handleLaneOffer(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) {
  const size_t lane = h.slot;  // validChunk: 0 (lane 0's copy h.index) .. kMaxLanes, a port
  if (lane == 0) return handleCopyOffer(h, lane0, out, why);
  const int family = lane <= helpers_.size() ? lanePeer_[lane].family() : AF_UNSPEC;
  if (!lane0 || !multiRail_ || lane > helpers_.size() || !closedSent_[lane] || rejoin_[lane].port != 0 ||
      (family != AF_INET && family != AF_INET6)) {
    *why = "lane offer for lane " + std::to_string(lane) + (lane0 ? "" : " on a helper lane") +
           ", which is not a closed lane";
    return Status::RemoteError;
  }
  rejoin_[lane].port = static_cast<uint16_t>(h.offset);
  rejoin_[lane].offeredNs = steadyNowNs();
  rejoin_[lane].nextNs = 0;
  rejoin_[lane].backoffNs = 0;
  rejoins_.fetch_add(1, std::memory_order_relaxed);
  *out = Landing{};
  out->discard = true;  // no payload
  return Status::Ok;
}

// The sender dropped lane 0's copy h.index (or finds it dropped) and offers it again: the copy goes here too, and
// is joined again from its own end.
Status TcpRecvComm::handleCopyOffer(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) {
  const int c = h.index;  // validChunk: 0 or 1
  const int family = copyPeer_[c].family();
  if (!lane0 || !mirror_ || (family != AF_INET && family != AF_INET6)) {
    *why = "lane offer for lane 0's copy " + std::to_string(c) + (lane0 ? "" : " on a helper lane") +
           ", which this connection does not have";
    return Status::RemoteError;
  }
  // A newer offer replaces one not joined yet (the sender offers a copy again only after it was back and failed).
  if (rejoin_[0].port != 0) rejoins_.fetch_sub(1, std::memory_order_relaxed);
  if (mirror_->live(c))
    ICN_INFO(subsys::Net, "TCP connection with %s: the sender dropped lane 0 over %s; it joins again",
             failure_.peer().c_str(), mirror_->rail(c).c_str());
  mirror_->drop(c, "dropped by the sender", false);
  rejoin_[0] = Rejoin{};
  rejoin_[0].port = static_cast<uint16_t>(h.offset);
  rejoin_[0].copy = c;
  rejoin_[0].offeredNs = steadyNowNs();
  rejoins_.fetch_add(1, std::memory_order_relaxed);
  *out = Landing{};
  out->discard = true;  // no payload
  return Status::Ok;
}

namespace {
// One attempt on an offered lane: its TCP connect within kRejoinConnectNs (a SYN over a link that works is answered
// within a round trip, a few milliseconds in a cluster even behind a full queue; one over a link still down is not
// answered at all), the handshake after it within kRejoinAttemptNs of the start.
constexpr int64_t kRejoinConnectNs = 150'000'000;
constexpr int64_t kRejoinAttemptNs = 2'000'000'000;
// Between attempts: 100 ms while the offer is younger than kRejoinEagerNs, so a link back from an outage of seconds
// is tried again within a quarter of a second (an attempt every 0.25 s); after that up to a second, so a link gone
// for good costs its peers under one SYN a second per lane.
constexpr int64_t kFirstRejoinBackoffNs = 100'000'000;
constexpr int64_t kEagerRejoinBackoffNs = 100'000'000;
constexpr int64_t kMaxRejoinBackoffNs = 1'000'000'000;
constexpr int64_t kRejoinEagerNs = 10'000'000'000;
}  // namespace

// Connects each offered lane from its own end to the sender's offer, one attempt at a time, backing off while its
// link is still down.
void TcpRecvComm::rejoinLanes(int64_t nowNs) {
  for (size_t lane = 0; lane <= helpers_.size(); lane++) {  // lane 0: lane 0's copy rejoin_[0].copy
    Rejoin& j = rejoin_[lane];
    if (j.port == 0) continue;
    const int blobLane = lane == 0 ? -1 : static_cast<int>(lane);
    const SockAddr& local = lane == 0 ? copyLocal_[j.copy] : laneLocal_[lane];
    auto retryLater = [&] {
      j.connector.reset();
      const int64_t cap = nowNs - j.offeredNs < kRejoinEagerNs ? kEagerRejoinBackoffNs : kMaxRejoinBackoffNs;
      j.backoffNs = std::min(std::max(2 * j.backoffNs, kFirstRejoinBackoffNs), cap);
      j.nextNs = nowNs + j.backoffNs;
    };
    if (!j.connector) {
      if (nowNs < j.nextNs) continue;
      SockAddr dest = lane == 0 ? copyPeer_[j.copy] : lanePeer_[lane];
      if (dest.family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&dest.storage)->sin6_port = htons(j.port);
      else reinterpret_cast<sockaddr_in*>(&dest.storage)->sin_port = htons(j.port);
      j.confirmed = false;
      j.attemptNs = nowNs;
      if (OobConnector::startTo(dest, &local, makeLocalHello(kTransportTcp, commId_, laneBlob(blobLane)),
                                &j.connector, true) != Status::Ok)
        retryLater();
      continue;
    }
    Handshake::Phase phase;
    const int64_t took = nowNs - j.attemptNs;
    if (j.connector->progress(&phase) != Status::Ok || took > kRejoinAttemptNs ||
        (!j.connector->connected() && took > kRejoinConnectNs)) {
      retryLater();
      continue;
    }
    if (phase == Handshake::Phase::PeerKnown && !j.confirmed) {
      if (!isLaneBlob(j.connector->handshake().peer(), blobLane)) {
        ICN_WARN(subsys::Net, "TCP connection with %s: the answer to lane %zu's offer names another lane or "
                 "connection", failure_.peer().c_str(), lane);
        retryLater();
        continue;
      }
      j.confirmed = true;
      j.connector->handshake().confirm();
      if (j.connector->progress(&phase) != Status::Ok) {
        retryLater();
        continue;
      }
    }
    if (phase != Handshake::Phase::Done) continue;
    if (lane == 0) {
      readmitCopy(j.copy, j.connector->handshake().takeFd(), j.offeredNs, false);
      j = Rejoin{};
      rejoins_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    finishRejoin(static_cast<int>(lane), j.connector->handshake().takeFd());
  }
}

void TcpRecvComm::finishRejoin(int lane, Fd fd) {
  tuneLane(fd.get());
  const size_t i = static_cast<size_t>(lane - 1);
  auto fresh = std::make_unique<RecvHelper>(std::move(fd), *this, failure_, closedLanes_, lane, failover_);
  std::unique_ptr<RecvHelper> old;
  {
    std::lock_guard lk(eagerMu_);  // noteChange() walks the helpers under it
    old = std::move(helpers_[i]);
    helpers_[i] = std::move(fresh);
  }
  old->stop();
  std::vector<std::unique_ptr<Helper>> stopped;
  stopped.push_back(std::move(old));
  reaper().adopt(std::move(stopped));
  laneDown_[static_cast<size_t>(lane)] = false;
  closedSent_[static_cast<size_t>(lane)] = false;
  closedLanes_.fetch_sub(1);
  rejoin_[static_cast<size_t>(lane)] = Rejoin{};
  rejoins_.fetch_sub(1, std::memory_order_relaxed);
  ICN_INFO(subsys::Net, "TCP connection with %s: lane %d is back", failure_.peer().c_str(), lane);
}

}  // namespace icn::tcp
