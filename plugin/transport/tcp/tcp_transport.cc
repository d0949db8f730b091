// Connection set-up: the connector runs the out-of-band handshake on a control socket (proposing its lane count,
// eager limit and a random token), then one more handshake per lane, each naming the token and its index. The
// acceptor matches lanes to the control connection by token and hands out a comm once every socket has finished
// its handshake. Every lane handshake is authenticated like the control one (ICN_AUTH_KEY), and a connection
// whose lanes do not all arrive within ICN_CONNECT_TIMEOUT_MS is dropped. A connection in set-up holds one place in
// the listener's set-up budget (core/setup_ledger.h), with its control socket and, once named by their HELLO, its
// lanes' sockets; a lane before its HELLO is a handshake of its own there.
//
// The lanes reuse the handshake's sockets, and a handshake reads whatever has arrived: no data may reach a socket
// while its handshake can still read it. So the connector sends its control READY only once every lane handshake
// is over on its side (the acceptor sends its first clear-to-send record only after that READY), and it sends
// nothing on a lane before the acceptor's first clear-to-send record (whose comm exists only after every lane's
// handshake is over on that side too).
#include "transport/tcp/tcp_transport.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "core/auth.h"
#include "core/host_nic.h"
#include "core/log.h"
#include "core/oob.h"
#include "core/params.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_rails.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {
namespace {

static_assert(params::minOf(params::Id::TcpStreams) >= 0 && params::maxOf(params::Id::TcpStreams) <= kMaxLanes);
static_assert(params::minOf(params::Id::TcpEagerBytes) >= 0 &&
              params::maxOf(params::Id::TcpEagerBytes) <= int64_t{kMaxEagerBytes});
int wantedLanes() { return static_cast<int>(params::getInt(params::Id::TcpStreams)); }
uint32_t wantedEagerBytes() { return static_cast<uint32_t>(params::getInt(params::Id::TcpEagerBytes)); }

bool sameToken(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kTokenSize; i++) diff |= a[i] ^ b[i];
  return diff == 0;
}

// Lane 0 on two rails (tcp_lane0.h) where there is a second rail.
bool mirrorWanted() { return params::getBool(params::Id::TcpFailover) && params::getBool(params::Id::TcpLane0Copy); }
// What one connection holds while it is set up: its control socket, up to 1 + ICN_TCP_STREAMS lanes, and lane 0's
// copy where the listener takes one (a second rail).
size_t socketsPerConnection(bool copy) { return 2u + static_cast<size_t>(wantedLanes()) + (copy ? 1u : 0u); }

// Every socket of a connection with the name of the rail it runs on.
void nameLanes(Sockets& s, const std::vector<Rail>& rails, bool outgoing) {
  s.laneRail.clear();
  s.railNames.clear();
  auto railOf = [&](const Fd& f) {
    SockAddr local, peer;
    local.len = peer.len = sizeof local.storage;
    getsockname(f.get(), reinterpret_cast<sockaddr*>(&local.storage), &local.len);
    getpeername(f.get(), reinterpret_cast<sockaddr*>(&peer.storage), &peer.len);
    std::string ifname = "?";
    for (auto& r : rails)
      if (sameHost(r.addr, local)) ifname = r.ifname;
    const std::string name = ifname + (outgoing ? " -> " : " <- ") + ipOnly(peer);
    int idx = -1;
    for (size_t k = 0; k < s.railNames.size(); k++)
      if (s.railNames[k] == name) idx = static_cast<int>(k);
    if (idx < 0) {
      idx = static_cast<int>(s.railNames.size());
      s.railNames.push_back(name);
    }
    return idx;
  };
  for (auto& f : s.lanes) s.laneRail.push_back(railOf(f));
  if (s.lane0Copy.valid()) s.lane0CopyRail = railOf(s.lane0Copy);
}

// "; lane 0 also over eth1 -> 10.0.1.2" for a connection whose lane 0 runs on two rails.
std::string describeCopy(const Sockets& s) {
  if (!s.lane0Copy.valid() || s.lane0CopyRail < 0 || static_cast<size_t>(s.lane0CopyRail) >= s.railNames.size())
    return "";
  return "; lane 0 also over " + s.railNames[static_cast<size_t>(s.lane0CopyRail)] + " (failover)";
}
class TcpListenComm final : public ListenComm {
 public:
  TcpListenComm(std::unique_ptr<OobListener> l, std::vector<RailAddr> railAddrs, const std::vector<Rail>& rails)
      : listener_(std::move(l)), railAddrs_(std::move(railAddrs)), rails_(rails) {}
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  // One incoming connection: its control handshake and, as they arrive, its lanes' handshakes. It holds one place
  // in the listener's set-up ledger, which takes over each matched lane's socket.
  struct Setup {
    std::unique_ptr<SetupLedger::Slot> slot;
    std::unique_ptr<Handshake> control;
    Fd controlFd;
    Hello peer;
    std::string peerName;
    Blob blob;
    std::vector<std::unique_ptr<Handshake>> laneHs;
    std::vector<Fd> laneFds;
    std::unique_ptr<Handshake> copyHs;  // lane 0's copy, when the connector opened one
    Fd copyFd;
    std::chrono::steady_clock::time_point started;
    void closeAll();  // the ledger evicted it
  };
  void onPeerKnown(AcceptedHandshake a);
  Setup* findSetup(const uint8_t* token);
  // Ok with *ready once every socket of the connection has finished its handshake; an error drops it.
  Status advance(Setup& s, bool* ready);
  std::unique_ptr<RecvComm> makeComm(Setup& s);

  std::unique_ptr<OobListener> listener_;
  std::vector<RailAddr> railAddrs_;  // where the listener also accepts lanes: one per extra rail
  const std::vector<Rail>& rails_;   // the device's (it outlives its listen comms)
  std::vector<std::unique_ptr<Setup>> setups_;
};

void TcpListenComm::Setup::closeAll() {
  control.reset();
  controlFd.reset();
  for (auto& h : laneHs) h.reset();
  for (auto& f : laneFds) f.reset();
  copyHs.reset();
  copyFd.reset();
}

TcpListenComm::Setup* TcpListenComm::findSetup(const uint8_t* token) {
  for (auto& s : setups_)
    if (!s->slot->evicted() && sameToken(s->blob.token, token)) return s.get();
  return nullptr;
}

void TcpListenComm::onPeerKnown(AcceptedHandshake a) {
  std::unique_ptr<Handshake> hs = std::move(a.hs);
  Blob b;
  std::string why;
  if (decodeBlob(hs->peer().blob, &b, &why) != Status::Ok) {
    ICN_WARN(subsys::Net, "handshake with %s: %s", hs->peerName().c_str(), why.c_str());
    return;  // dropping the handshake closes the socket and gives its slot back
  }
  Setup* known = findSetup(b.token);
  if (b.kind == kBlobControl) {
    if (known) {
      ICN_WARN(subsys::Net, "handshake with %s: connection token already in use", hs->peerName().c_str());
      return;
    }
    auto s = std::make_unique<Setup>();
    s->blob = b;
    s->blob.value = static_cast<uint16_t>(std::min<int>(b.value, wantedLanes()));
    s->blob.eagerBytes = std::min(b.eagerBytes, wantedEagerBytes());
    s->blob.nrails = static_cast<uint8_t>(railAddrs_.size());
    std::copy(railAddrs_.begin(), railAddrs_.end(), s->blob.rails);
    s->blob.flags = mirrorWanted() && !railAddrs_.empty() ? kBlobFlagMirror : 0;
    s->laneHs.resize(s->blob.value + 1u);
    s->laneFds.resize(s->blob.value + 1u);
    s->started = std::chrono::steady_clock::now();
    hs->confirm(encodeBlob(s->blob));
    s->control = std::move(hs);
    s->slot = std::move(a.slot);
    Setup* raw = s.get();
    s->slot->onEvict([raw] { raw->closeAll(); });
    setups_.push_back(std::move(s));
    return;
  }
  if (!known) {
    ICN_WARN(subsys::Net, "handshake with %s: lane for a connection this listener does not know",
             hs->peerName().c_str());
    return;
  }
  if (b.kind == kBlobLane0Copy) {
    if (!(known->blob.flags & kBlobFlagMirror) || known->copyHs || known->copyFd.valid()) {
      ICN_WARN(subsys::Net, "handshake with %s: lane 0's copy is not expected (not offered, or it arrived twice)",
               hs->peerName().c_str());
      return;
    }
    hs->confirm(encodeBlob(b));
    known->copyHs = std::move(hs);
    known->slot->addSocket();
    return;
  }
  if (b.value > known->blob.value || known->laneHs[b.value] || known->laneFds[b.value].valid()) {
    ICN_WARN(subsys::Net, "handshake with %s: lane %u is not expected (%u lanes, or it arrived twice)",
             hs->peerName().c_str(), b.value, known->blob.value);
    return;
  }
  hs->confirm(encodeBlob(b));
  known->laneHs[b.value] = std::move(hs);
  known->slot->addSocket();  // the lane's socket now counts with its connection (its own slot goes with `a`)
}

Status TcpListenComm::advance(Setup& s, bool* ready) {
  *ready = false;
  if (s.slot->evicted()) return Status::RemoteError;  // its sockets are closed; the ledger logged why
  Handshake::Phase phase;
  if (s.control) {
    ICN_CHECK(s.control->progress(&phase));  // failures are logged with the peer's name
    if (phase == Handshake::Phase::Done) {
      s.peer = s.control->peer();
      s.peerName = s.control->peerName();
      s.controlFd = s.control->takeFd();
      s.control.reset();
    }
  }
  bool all = !s.control;
  for (size_t i = 0; i < s.laneHs.size(); i++) {
    if (s.laneHs[i]) {
      ICN_CHECK(s.laneHs[i]->progress(&phase));
      if (phase == Handshake::Phase::Done) {
        s.laneFds[i] = s.laneHs[i]->takeFd();
        s.laneHs[i].reset();
      }
    }
    all = all && s.laneFds[i].valid();
  }
  // The connector finishes lane 0's copy before its control READY, and its HELLO came before it: a copy not here
  // now never comes.
  if (s.copyHs) {
    ICN_CHECK(s.copyHs->progress(&phase));
    if (phase == Handshake::Phase::Done) {
      s.copyFd = s.copyHs->takeFd();
      s.copyHs.reset();
    }
  }
  all = all && !s.copyHs;
  if (all) {
    *ready = true;
    return Status::Ok;
  }
  long long limit = params::getInt(params::Id::ConnectTimeoutMs);
  if (std::chrono::steady_clock::now() - s.started > std::chrono::milliseconds(limit)) {
    int arrived = 0;
    for (auto& f : s.laneFds) arrived += f.valid();
    ICN_WARN(subsys::Net, "connection from %s: %d of %zu lanes ready after %lld ms (ICN_CONNECT_TIMEOUT_MS)",
             s.control ? s.control->peerName().c_str() : s.peerName.c_str(), arrived, s.laneFds.size(), limit);
    return Status::RemoteError;
  }
  return Status::Ok;
}

std::unique_ptr<RecvComm> TcpListenComm::makeComm(Setup& s) {
  Sockets socks;
  socks.control = std::move(s.controlFd);
  socks.eagerBytes = s.blob.eagerBytes;
  memcpy(socks.token, s.blob.token, kTokenSize);
  for (auto& f : s.laneFds) {
    tuneLane(f.get());
    socks.lanes.push_back(std::move(f));
  }
  if (s.copyFd.valid()) {
    tuneLane(s.copyFd.get());
    socks.lane0Copy = std::move(s.copyFd);
  }
  nameLanes(socks, rails_, false);
  NetCommInfo info = netCommInfo(s.peer, listener_->commId(), false);
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "TCP receive connection from %s (rank %d) ready: %zu lanes on %zu rail(s): %s%s; eager "
             "messages <= %u bytes", s.peerName.c_str(), s.peer.rank, socks.lanes.size(), socks.railNames.size(),
             describeLanes(socks.railNames, socks.laneRail).c_str(), describeCopy(socks).c_str(), socks.eagerBytes);
  return std::make_unique<TcpRecvComm>(std::move(socks), s.peerName, info);
}

Status TcpListenComm::accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  std::vector<AcceptedHandshake> proven;
  ICN_CHECK(listener_->poll(SIZE_MAX, &proven));
  for (auto& a : proven) onPeerKnown(std::move(a));
  for (size_t i = 0; i < setups_.size(); i++) {
    bool ready = false;
    if (advance(*setups_[i], &ready) != Status::Ok) {  // logged; other connections go on
      setups_.erase(setups_.begin() + static_cast<long>(i--));
      continue;
    }
    if (!ready) continue;
    *out = makeComm(*setups_[i]);
    setups_.erase(setups_.begin() + static_cast<long>(i));
    return Status::Ok;
  }
  return Status::Ok;
}

// The connect side's state, parked in NCCL's handle between calls.
struct PendingConnect {
  CommConfig config;
  Blob blob;
  std::vector<Rail> rails;  // ours
  std::vector<RailPath> paths;  // the rails both ends reach, the handshake's first
  std::unique_ptr<OobConnector> control;
  bool answered = false;  // the acceptor's control blob arrived and the lanes are under way
  bool controlConfirmed = false;
  Fd controlFd;
  Hello peer;
  std::string peerName;
  std::vector<std::unique_ptr<OobConnector>> lanes;
  std::vector<bool> laneConfirmed;
  std::vector<Fd> laneFds;
  std::unique_ptr<OobConnector> copy;  // lane 0's copy on the second rail
  bool copyConfirmed = false;
  Fd copyFd;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(DeviceProps props, std::vector<Rail> rails) : props_(std::move(props)), rails_(std::move(rails)) {}
  const char* name() const override { return "tcp"; }
  int deviceCount() const override { return 1; }
  Status getProperties(int dev, DeviceProps* out) const override {
    if (dev != 0) return Status::InvalidArgument;
    *out = props_;
    return Status::Ok;
  }
  Status listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) override {
    if (dev != 0) {
      ICN_WARN(subsys::Net, "listen: device %d does not exist (TCP transport has 1 device)", dev);
      return Status::InvalidArgument;
    }
    std::unique_ptr<OobListener> l;
    ICN_CHECK(OobListener::open(kTransportTcp, config.commId, socketsPerConnection(rails_.size() > 1 && mirrorWanted()),
                                handle, &l));
    std::vector<RailAddr> railAddrs;
    for (size_t r = 1; r < rails_.size() && railAddrs.size() < static_cast<size_t>(kMaxRails); r++) {
      SockAddr bound;
      if (l->addAddress(rails_[r].addr, &bound) == Status::Ok) railAddrs.push_back(toRailAddr(bound));
      // else: logged; the connection uses the other rails
    }
    *out = std::make_unique<TcpListenComm>(std::move(l), std::move(railAddrs), rails_);
    return Status::Ok;
  }
  Status connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) override;
  // Closed comms' helper threads end on their own after close; finalize joins them (and closes their sockets).
  void quiesce() override { reaper().drain(); }

 private:
  static Status progressControl(PendingConnect& pc, HandleBytes handle);
  static Status progressLanes(PendingConnect& pc, bool* done);
  // One lane's connection (kind kBlobLane, or kBlobLane0Copy for lane 0's copy): *fd once its handshake is over.
  static Status progressLane(PendingConnect& pc, std::unique_ptr<OobConnector>& c, uint8_t kind, size_t index,
                             bool* confirmed, Fd* fd, bool* done);
  DeviceProps props_;
  std::vector<Rail> rails_;  // the handshake's interface first
};

Status TcpTransport::progressControl(PendingConnect& pc, HandleBytes handle) {
  Handshake::Phase phase;
  ICN_CHECK(pc.control->progress(&phase));
  Handshake& hs = pc.control->handshake();
  if (phase == Handshake::Phase::PeerKnown && !pc.answered) {
    Blob answer;
    std::string why;
    if (decodeBlob(hs.peer().blob, &answer, &why) != Status::Ok || answer.kind != kBlobControl ||
        answer.value > pc.blob.value || answer.eagerBytes > pc.blob.eagerBytes ||
        !sameToken(answer.token, pc.blob.token)) {
      ICN_WARN(subsys::Net, "handshake with %s: %s", hs.peerName().c_str(),
               why.empty() ? "the answer does not match our TCP connection request" : why.c_str());
      return Status::RemoteError;
    }
    pc.blob.value = answer.value;
    pc.blob.eagerBytes = answer.eagerBytes;
    pc.answered = true;
    SockAddr handleAddr;
    std::string ignored;
    if (readListenHandle(handle, kTransportTcp, &handleAddr, &ignored) != Status::Ok) return Status::InvalidArgument;
    pc.paths = pairRails(pc.rails, handleAddr, answer);
    for (uint16_t i = 0; i <= pc.blob.value; i++) {
      Blob lane = pc.blob;
      lane.kind = kBlobLane;
      lane.value = i;
      Hello hello = makeLocalHello(kTransportTcp, pc.config.commId, encodeBlob(lane));
      const RailPath& path = pc.paths[pathOfLane(i, pc.paths.size())];
      std::unique_ptr<OobConnector> c;
      if (path.bindSource)
        ICN_CHECK(OobConnector::startTo(path.dest, &path.source, std::move(hello), &c));
      else
        ICN_CHECK(OobConnector::start(handle, kTransportTcp, std::move(hello), &c));
      pc.lanes.push_back(std::move(c));
    }
    pc.laneConfirmed.assign(pc.lanes.size(), false);
    pc.laneFds.resize(pc.lanes.size());
    if ((answer.flags & kBlobFlagMirror) && mirrorWanted() && pc.paths.size() >= 2) {
      Blob copy = pc.blob;
      copy.kind = kBlobLane0Copy;
      copy.value = 0;
      const RailPath& path = pc.paths[1];
      ICN_CHECK(OobConnector::startTo(path.dest, &path.source,
                                      makeLocalHello(kTransportTcp, pc.config.commId, encodeBlob(copy)), &pc.copy));
    }
    return Status::Ok;
  }
  if (phase != Handshake::Phase::Done) return Status::Ok;
  // Our READY is out and nothing else ever comes on this socket: take it before anything reads past the handshake.
  pc.peer = hs.peer();
  pc.peerName = hs.peerName();
  pc.controlFd = hs.takeFd();
  pc.control.reset();
  return Status::Ok;
}

Status TcpTransport::progressLane(PendingConnect& pc, std::unique_ptr<OobConnector>& c, uint8_t kind, size_t index,
                                  bool* confirmed, Fd* fd, bool* done) {
  if (!c) return Status::Ok;
  Handshake::Phase phase;
  ICN_CHECK(c->progress(&phase));
  Handshake& hs = c->handshake();
  if (phase == Handshake::Phase::PeerKnown && !*confirmed) {
    Blob answer;
    std::string why;
    if (decodeBlob(hs.peer().blob, &answer, &why) != Status::Ok || answer.kind != kind || answer.value != index ||
        !sameToken(answer.token, pc.blob.token)) {
      const std::string lane = kind == kBlobLane0Copy ? "lane 0's copy" : "lane " + std::to_string(index);
      ICN_WARN(subsys::Net, "handshake with %s: %s: %s", hs.peerName().c_str(), lane.c_str(),
               why.empty() ? "the answer does not match our lane" : why.c_str());
      return Status::RemoteError;
    }
    *confirmed = true;
    hs.confirm();
    ICN_CHECK(c->progress(&phase));
  }
  if (phase == Handshake::Phase::Done) {
    *fd = hs.takeFd();
    c.reset();
  } else {
    *done = false;
  }
  return Status::Ok;
}

Status TcpTransport::progressLanes(PendingConnect& pc, bool* done) {
  *done = true;
  for (size_t i = 0; i < pc.lanes.size(); i++) {
    bool confirmed = pc.laneConfirmed[i];
    ICN_CHECK(progressLane(pc, pc.lanes[i], kBlobLane, i, &confirmed, &pc.laneFds[i], done));
    pc.laneConfirmed[i] = confirmed;
  }
  return progressLane(pc, pc.copy, kBlobLane0Copy, 0, &pc.copyConfirmed, &pc.copyFd, done);
}

Status TcpTransport::connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  if (dev != 0) {
    ICN_WARN(subsys::Net, "connect: device %d does not exist (TCP transport has 1 device)", dev);
    return Status::InvalidArgument;
  }
  // Owned here while we work; parked back in the handle when NCCL has to call again.
  std::unique_ptr<PendingConnect> pc(takePending<PendingConnect>(handle));
  if (!pc) {
    pc = std::make_unique<PendingConnect>();
    pc->config = config;
    pc->rails = rails_;
    pc->blob.kind = kBlobControl;
    pc->blob.value = static_cast<uint16_t>(wantedLanes());
    pc->blob.eagerBytes = wantedEagerBytes();
    auth::fillNonce(std::span<uint8_t, kTokenSize>(pc->blob.token, kTokenSize));
    ICN_CHECK(OobConnector::start(handle, kTransportTcp,
                                  makeLocalHello(kTransportTcp, config.commId, encodeBlob(pc->blob)), &pc->control));
  }
  // On failure pc dies here, closing every socket, and the handle is clean for a retry.
  if (pc->control) ICN_CHECK(progressControl(*pc, handle));
  bool lanesDone = false;
  if (pc->answered) ICN_CHECK(progressLanes(*pc, &lanesDone));
  if (lanesDone && !pc->controlConfirmed) {  // every lane is ours now: let the acceptor finish
    pc->controlConfirmed = true;
    pc->control->handshake().confirm();
    ICN_CHECK(progressControl(*pc, handle));
  }
  if (pc->control) {
    parkPending(handle, pc.release());
    return Status::Ok;
  }
  Sockets socks;
  socks.control = std::move(pc->controlFd);
  socks.eagerBytes = pc->blob.eagerBytes;
  memcpy(socks.token, pc->blob.token, kTokenSize);
  for (auto& f : pc->laneFds) {
    tuneLane(f.get());
    socks.lanes.push_back(std::move(f));
  }
  if (pc->copyFd.valid()) {
    tuneLane(pc->copyFd.get());
    socks.lane0Copy = std::move(pc->copyFd);
  }
  nameLanes(socks, pc->rails, true);
  NetCommInfo info = netCommInfo(pc->peer, pc->config.commId, true);
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "TCP send connection to %s (rank %d) ready: %zu lanes on %zu rail(s): %s%s; eager messages "
             "<= %u bytes", pc->peerName.c_str(), pc->peer.rank, socks.lanes.size(), socks.railNames.size(),
             describeLanes(socks.railNames, socks.laneRail).c_str(), describeCopy(socks).c_str(), socks.eagerBytes);
  *out = std::make_unique<TcpSendComm>(std::move(socks), pc->peerName, info);
  return Status::Ok;
}

// The interface behind the handshake is where the traffic leaves the host; with more rails, the device's name
// and speed take them in.
DeviceProps probeDevice(const std::vector<Rail>& rails) {
  DeviceProps p;
  HostNic nic = probeHostNic("tcp", &p);
  std::string others;
  for (size_t r = 1; r < rails.size(); r++) {
    bool known = false;
    const int speed = interfaceSpeedMbps(rails[r].ifname, &known);
    p.name += "+" + rails[r].ifname;
    if (params::getInt(params::Id::NetSpeedMbps) <= 0) p.speedMbps += speed;
    others += ", " + rails[r].ifname + " (" + ipOnly(rails[r].addr) + ", " + std::to_string(speed) + " Mbps" +
              (known ? "" : " assumed") + ")";
  }
  p.ptrSupport = kMemHost;
  p.maxComms = 65536;
  p.maxRecvs = kMaxRecvs;
  p.maxP2pBytes = p.maxCollBytes = kMaxMessage;
  p.members = {0};
  p.rails = static_cast<int>(std::max<size_t>(rails.size(), 1));
  Tuning t = currentTuning();
  ICN_INFO(subsys::Net | subsys::Init,
           "TCP device %s: interface %s (%s)%s%s, speed %d Mbps%s, PCI %s, %d helper lanes per connection "
           "(pieces >= %zu bytes), messages <= %zu bytes on lane 0",
           p.name.c_str(), nic.ifname.c_str(), nic.addr.str().c_str(), others.empty() ? "" : ", rails",
           others.c_str(), p.speedMbps, nic.speedKnown ? "" : " (interface reports none: assumed)",
           p.pciPath.empty() ? "none (NCCL attaches the NIC to the CPU)" : p.pciPath.c_str(), wantedLanes(),
           t.chunkBytes, t.inlineBytes);
  return p;
}

}  // namespace

Status createTransport(std::unique_ptr<Transport>* out, std::string*) {
  std::vector<Rail> rails = pickRails(static_cast<size_t>(params::getInt(params::Id::TcpRails)));
  *out = std::make_unique<TcpTransport>(probeDevice(rails), std::move(rails));
  return Status::Ok;
}

}  // namespace icn::tcp
