// What both directions of a TCP connection share (CommCore): the settings a comm reads once, its sockets, memory
// registration (nothing to register: host memory only) and the peer's liveness.
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "core/log.h"
#include "core/params.h"
#include "transport/tcp/tcp_comm.h"

namespace icn::tcp {

// The settings' bounds (params.def) are what the wire allows: a value read is used as it is.
static_assert(params::minOf(params::Id::TcpInlineBytes) >= 0);
static_assert(params::minOf(params::Id::TcpChunkBytes) >= 4096, "a piece smaller than a page is all header");
static_assert(params::minOf(params::Id::TcpLaneEagerBytes) >= 0 &&
              params::maxOf(params::Id::TcpLaneEagerBytes) <= int64_t{kMaxMessage});
static_assert(params::minOf(params::Id::TcpEarlyLanes) >= 1 && params::maxOf(params::Id::TcpEarlyLanes) <= kMaxLanes);
static_assert(params::minOf(params::Id::PeerTimeoutMs) >= 1);

Tuning currentTuning() {
  Tuning t;
  t.inlineBytes = static_cast<size_t>(params::getInt(params::Id::TcpInlineBytes));
  t.chunkBytes = static_cast<size_t>(params::getInt(params::Id::TcpChunkBytes));
  t.laneEagerBytes = static_cast<size_t>(params::getInt(params::Id::TcpLaneEagerBytes));
  t.earlyLanes = static_cast<int>(params::getInt(params::Id::TcpEarlyLanes));
  return t;
}

CommCore::CommCore(Sockets& s, std::string peer, NetCommInfo info)
    : failure_(peer),
      control_(std::move(s.control), peer),
      lane0_(std::move(s.lanes[0])),
      lane0Copy_(std::move(s.lane0Copy)),
      lane0Source_(lane0_.get()),
      tuning_(currentTuning()),
      peerTimeout_(params::getInt(params::Id::PeerTimeoutMs)),
      watch_(std::make_unique<diagnose::ConnectionWatch>(diagnose::linkInfoFor(info, lane0_.get()))) {
  counters_ = netstats::registerComm(info);
  memcpy(token_, s.token, kTokenSize);
  commId_ = info.commId;
  // Lane 0 has moved out of s.lanes already: its ends from our copy.
  for (size_t i = 0; i < s.lanes.size(); i++) {
    const int fd = i == 0 ? lane0_.get() : s.lanes[i].get();
    SockAddr local, peer;
    local.len = peer.len = sizeof local.storage;
    getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.len);
    getpeername(fd, reinterpret_cast<sockaddr*>(&peer.storage), &peer.len);
    laneLocal_.push_back(local);
    lanePeer_.push_back(peer);
  }
  copyLocal_[0] = laneLocal_[0];
  copyPeer_[0] = lanePeer_[0];
  if (lane0Copy_.valid()) {
    copyLocal_[1].len = copyPeer_[1].len = sizeof copyLocal_[1].storage;
    getsockname(lane0Copy_.get(), reinterpret_cast<sockaddr*>(&copyLocal_[1].storage), &copyLocal_[1].len);
    getpeername(lane0Copy_.get(), reinterpret_cast<sockaddr*>(&copyPeer_[1].storage), &copyPeer_[1].len);
  }
}

void CommCore::readmitCopy(int c, Fd fd, int64_t downAtNs, bool speakFirst) {
  tuneLane(fd.get());
  mirror_->readmit(c, fd.get(), speakFirst);
  copyFd(c) = std::move(fd);  // closes the socket the copy had before
  ICN_INFO(subsys::Net, "TCP connection with %s: lane 0 over %s is back, %.1f s after it was dropped",
           failure_.peer().c_str(), mirror_->rail(c).c_str(), static_cast<double>(steadyNowNs() - downAtNs) / 1e9);
}

void CommCore::startMirror(Sockets& s, size_t ringBytes) {
  if (!lane0Copy_.valid()) return;
  auto railName = [&](int rail) {
    return rail >= 0 && static_cast<size_t>(rail) < s.railNames.size() ? s.railNames[static_cast<size_t>(rail)]
                                                                       : std::string("?");
  };
  mirror_ = std::make_unique<Lane0Mirror>(std::array<int, 2>{lane0_.get(), lane0Copy_.get()},
                                          std::array<std::string, 2>{railName(s.laneRail.empty() ? 0 : s.laneRail[0]),
                                                                     railName(s.lane0CopyRail)},
                                          ringBytes, failure_.peer());
}

std::vector<uint8_t> CommCore::laneBlob(int lane) const {
  Blob b;
  b.kind = lane < 0 ? kBlobLane0Copy : kBlobLane;
  b.value = static_cast<uint16_t>(lane < 0 ? 0 : lane);
  memcpy(b.token, token_, kTokenSize);
  return encodeBlob(b);
}

bool CommCore::isLaneBlob(const Hello& peer, int lane) const {
  Blob b;
  std::string why;
  if (decodeBlob(peer.blob, &b, &why) != Status::Ok || b.kind != (lane < 0 ? kBlobLane0Copy : kBlobLane) ||
      b.value != (lane < 0 ? 0 : lane))
    return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < kTokenSize; i++) diff |= b.token[i] ^ token_[i];
  return diff == 0;
}

CommCore::~CommCore() { netstats::unregisterComm(counters_); }

Status CommCore::regMr(void* data, size_t size, int type, void** mh) {
  if (!mh) return Status::InvalidArgument;
  if (type != kMemHost) {
    ICN_WARN(subsys::Net, "regMr: the TCP transport moves host memory only (memory type %d)", type);
    return Status::InvalidArgument;
  }
  *mh = data ? data : this;  // nothing to register: any non-null handle will do
  return Status::Ok;
}

Status CommCore::deregMr(void*) { return Status::Ok; }

Status CommCore::checkPeer(bool peerClosed, int pending) {
  if (Status st = failure_.status(); st != Status::Ok) return st;
  if (peerClosed) {
    failure_.fail(Status::RemoteError, "peer closed the connection with " + std::to_string(pending) +
                                           " request(s) unfinished (process exited or closed its comm)");
    return Status::RemoteError;
  }
  if (control_.checkAlive() == Status::Ok) return Status::Ok;
  // Lane 0 on two rails outlives the control socket's: its copies end when the peer closes or its host goes (their
  // own keepalive and ICN_PEER_TIMEOUT_MS), which fails the connection there.
  if (mirror_ && mirror_->liveCopies() > 0) {
    if (!controlLost_)
      ICN_INFO(subsys::Net, "TCP connection with %s: control socket lost (%s); lane 0 goes on over %d rail(s)",
               failure_.peer().c_str(), control_.deadReason().c_str(), mirror_->liveCopies());
    controlLost_ = true;
    return Status::Ok;
  }
  // A peer that closed its control socket may still have bytes in flight on the lanes, and when its process
  // exits its lanes close right after them (peerClosed above). Lanes left open past ICN_PEER_TIMEOUT_MS
  // without the control socket mean a broken peer.
  auto now = std::chrono::steady_clock::now();
  if (peerGoneAt_ == std::chrono::steady_clock::time_point{}) peerGoneAt_ = now;
  if (now - peerGoneAt_ < std::chrono::milliseconds(params::getInt(params::Id::PeerTimeoutMs))) return Status::Ok;
  failure_.fail(Status::RemoteError, "peer is gone (" + control_.deadReason() + ") with " + std::to_string(pending) +
                                         " request(s) unfinished");
  return Status::RemoteError;
}

}  // namespace icn::tcp
