#include "transport/ib/ib_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "core/log.h"
#include "core/oob.h"
#include "core/params.h"
#include "transport/ib/ib_comm.h"
#include "transport/ib/ib_select.h"

namespace icn::ib {
namespace {

struct VDevice {
  std::vector<int> members;  // indices into ports_
  DeviceProps props;
};

// Connections past their peer's proof whose handshake is still finishing, per listen comm: each holds QPs, so
// the listener takes no more proven peers until one finishes or fails.
constexpr size_t kMaxSetups = 16;

int qpsPerConnection(int members) {
  int q = std::clamp<int>(int(params::getInt(params::Id::IbQpsPerConnection)), 1, kMaxQps);
  q = std::max(q, members);
  return std::min(kMaxQps, (q + members - 1) / members * members);  // every member gets the same count
}

class IbTransport;

class IbListenComm final : public ListenComm {
 public:
  IbListenComm(IbTransport& t, int dev, std::unique_ptr<OobListener> l) : t_(t), dev_(dev), listener_(std::move(l)) {}
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  // One incoming connection whose peer proved itself (live, and the job key when one is set), its QPs built,
  // waiting for READY. Several may be in flight, so a peer that stalls after its proof never holds up the others.
  struct Setup {
    std::unique_ptr<Handshake> hs;
    std::unique_ptr<IbRecvComm> comm;
  };
  IbTransport& t_;
  int dev_;
  std::unique_ptr<OobListener> listener_;
  std::vector<Setup> setups_;
};

struct PendingConnect {
  std::unique_ptr<OobConnector> oob;
  std::unique_ptr<IbSendComm> comm;
  CommConfig config;
  bool connected = false;
};

class IbTransport final : public Transport {
 public:
  IbTransport(std::vector<Port> ports, std::vector<VDevice> devs) : ports_(std::move(ports)), devs_(std::move(devs)) {}
  const char* name() const override { return "ib"; }
  int deviceCount() const override { return int(devs_.size()); }
  Status getProperties(int dev, DeviceProps* out) const override {
    if (dev < 0 || dev >= deviceCount()) return Status::InvalidArgument;
    *out = devs_[dev].props;
    return Status::Ok;
  }
  Status listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) override;
  Status connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) override;
  Status makeVDevice(std::span<const int> members, int* newDev) override;

  std::vector<const Port*> portsOf(int dev) const {
    std::vector<const Port*> v;
    for (int m : devs_[dev].members) v.push_back(&ports_[m]);
    return v;
  }
  const DeviceProps& props(int dev) const { return devs_[dev].props; }

 private:
  bool validDev(int dev, const char* what) const {
    if (dev >= 0 && dev < deviceCount()) return true;
    ICN_WARN(subsys::Net, "%s: device %d does not exist (ib transport has %d)", what, dev, deviceCount());
    return false;
  }
  std::vector<Port> ports_;
  std::vector<VDevice> devs_;
  std::mutex mu_;  // makeVDevice vs readers: NCCL calls it during init only
};

Status IbListenComm::accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  std::unique_ptr<Handshake> hs;
  // No QP exists for a peer before the handshake reached PeerKnown (see handshake.h).
  ICN_CHECK(listener_->poll(setups_.size() < kMaxSetups ? &hs : nullptr));
  if (hs) {
    // The sender's blob tells us its QPs and FIFO; build everything and answer with ours. A bad blob or a
    // failed set-up is that peer's problem (logged): drop it, keep listening.
    ConnBlob peer;
    std::string why;
    std::unique_ptr<IbRecvComm> comm;
    Status st = decodeBlob(hs->peer().blob, &peer, &why);
    if (st == Status::Ok) {
      comm = std::make_unique<IbRecvComm>(t_.portsOf(dev_));
      st = comm->init(peer, qpTuningFromParams(-1), &why);
    }
    if (st != Status::Ok) {
      ICN_WARN(subsys::Net, "ib accept from %s: %s", hs->peerName().c_str(), why.c_str());
    } else {
      hs->confirm(encodeBlob(comm->localBlob()));
      setups_.push_back({std::move(hs), std::move(comm)});
    }
  }
  for (size_t i = 0; i < setups_.size(); i++) {
    Setup& s = setups_[i];
    Handshake::Phase phase;
    if (s.hs->progress(&phase) != Status::Ok) {
      setups_.erase(setups_.begin() + static_cast<long>(i--));  // logged with the peer's name; others go on
      continue;
    }
    if (phase != Handshake::Phase::Done) continue;
    const Hello peer = s.hs->peer();
    std::string name = s.hs->peerName();
    s.comm->start(ControlChannel(s.hs->takeFd(), name), netCommInfo(peer, listener_->commId(), false));
    if (params::getInt(params::Id::LogDetail) >= 1)
      ICN_INFO(subsys::Net, "ib receive connection from %s (rank %d) on %s: %d QP(s)", name.c_str(), peer.rank,
               t_.props(dev_).name.c_str(), s.comm->qpCount());
    *out = std::move(s.comm);
    setups_.erase(setups_.begin() + static_cast<long>(i));
    return Status::Ok;
  }
  return Status::Ok;
}

Status IbTransport::listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) {
  if (!validDev(dev, "listen")) return Status::InvalidArgument;
  std::unique_ptr<OobListener> l;
  ICN_CHECK(OobListener::open(kTransportIb, config.commId, handle, &l));
  *out = std::make_unique<IbListenComm>(*this, dev, std::move(l));
  return Status::Ok;
}

Status IbTransport::connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  if (!validDev(dev, "connect")) return Status::InvalidArgument;
  std::unique_ptr<PendingConnect> pc(takePending<PendingConnect>(handle));
  std::string why;
  if (!pc) {
    pc = std::make_unique<PendingConnect>();
    pc->config = config;
    pc->comm = std::make_unique<IbSendComm>(portsOf(dev));
    if (Status st = pc->comm->init(qpsPerConnection(int(devs_[dev].members.size())), &why); st != Status::Ok) {
      ICN_WARN(subsys::Net, "ib connect on %s: %s", devs_[dev].props.name.c_str(), why.c_str());
      return st;
    }
    ICN_CHECK(OobConnector::start(handle, kTransportIb,
                                  makeLocalHello(kTransportIb, config.commId, encodeBlob(pc->comm->localBlob())),
                                  &pc->oob));
  }
  Handshake::Phase phase;
  ICN_CHECK(pc->oob->progress(&phase));  // failure: pc is destroyed, the handle is clean for a retry
  if (phase == Handshake::Phase::PeerKnown && !pc->connected) {
    Handshake& hs = pc->oob->handshake();
    ConnBlob peer;
    Status st = decodeBlob(hs.peer().blob, &peer, &why);
    if (st == Status::Ok) {
      pc->comm->setPeerMembers(int(peer.devs.size()));
      st = pc->comm->connectQps(peer, qpTuningFromParams(pc->config.trafficClass), &why);
    }
    if (st != Status::Ok) {
      ICN_WARN(subsys::Net, "ib connect to %s: %s", hs.peerName().c_str(), why.c_str());
      return st;
    }
    pc->connected = true;
    hs.confirm();
    ICN_CHECK(pc->oob->progress(&phase));
  }
  if (phase != Handshake::Phase::Done) {
    parkPending(handle, pc.release());
    return Status::Ok;
  }
  Handshake& hs = pc->oob->handshake();
  std::string name = hs.peerName();
  pc->comm->start(ControlChannel(hs.takeFd(), name), netCommInfo(hs.peer(), pc->config.commId, true));
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "ib send connection to %s (rank %d) on %s: %d QP(s)", name.c_str(), hs.peer().rank,
             devs_[dev].props.name.c_str(), pc->comm->qpCount());
  *out = std::move(pc->comm);
  return Status::Ok;
}

Status IbTransport::makeVDevice(std::span<const int> members, int* newDev) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DeviceProps> phys;
  for (const Port& p : ports_) phys.push_back(p.props);
  VDevice v;
  std::string why;
  if (fuseDevices(phys, members, &v.props, &why) != Status::Ok) {
    ICN_WARN(subsys::Net, "makeVDevice: %s", why.c_str());
    return Status::InvalidArgument;
  }
  v.members = v.props.members;
  devs_.push_back(std::move(v));
  *newDev = int(devs_.size()) - 1;
  ICN_INFO(subsys::Net | subsys::Init, "ib virtual device %d = %s (%d Mbps)", *newDev, devs_.back().props.name.c_str(),
           devs_.back().props.speedMbps);
  return Status::Ok;
}

}  // namespace

// Opens the chosen ports; see ib_transport_init.cc.
Status openPorts(const std::string& sysRoot, std::vector<Port>* ports, std::string* whyNot);

Status createTransportWithRoot(const std::string& sysRoot, std::unique_ptr<Transport>* out, std::string* whyNot) {
  std::vector<Port> ports;
  ICN_CHECK(openPorts(sysRoot, &ports, whyNot));
  std::vector<VDevice> devs;
  for (size_t i = 0; i < ports.size(); ++i) devs.push_back({{int(i)}, ports[i].props});
  *out = std::make_unique<IbTransport>(std::move(ports), std::move(devs));
  return Status::Ok;
}

Status createTransport(std::unique_ptr<Transport>* out, std::string* whyNot) {
  return createTransportWithRoot("", out, whyNot);
}

}  // namespace icn::ib
