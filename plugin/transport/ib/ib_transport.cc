#include "transport/ib/ib_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "core/connect_driver.h"
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

static_assert(params::minOf(params::Id::IbQpsPerConnection) >= 1 &&
              params::maxOf(params::Id::IbQpsPerConnection) <= kMaxQps);

int qpsPerConnection(int members) {
  int q = int(params::getInt(params::Id::IbQpsPerConnection));
  q = std::max(q, members);
  return std::min(kMaxQps, (q + members - 1) / members * members);  // every member gets the same count
}

class IbTransport;

// The receive side of one connection: QPs built once the sender proved itself, answered with ours.
class IbRecvSetup final : public ConnectionSetup {
 public:
  explicit IbRecvSetup(std::vector<const Port*> ports) : ports_(std::move(ports)) {}
  Status onPeerKnown(const Handshake& hs, std::vector<uint8_t>* answer) override {
    // The sender's blob tells us its QPs and FIFO; build everything and answer with ours. A bad blob or a
    // failed set-up is that peer's problem (logged): the driver drops it and keeps listening.
    ConnBlob peer;
    std::string why;
    Status st = decodeBlob(hs.peer().blob, &peer, &why);
    if (st == Status::Ok) {
      comm = std::make_unique<IbRecvComm>(ports_);
      st = comm->init(peer, qpTuningFromParams(-1), &why);
    }
    if (st != Status::Ok) {
      ICN_WARN(subsys::Net, "ib accept from %s: %s", hs.peerName().c_str(), why.c_str());
      return st;
    }
    *answer = encodeBlob(comm->localBlob());
    return Status::Ok;
  }
  std::unique_ptr<IbRecvComm> comm;

 private:
  std::vector<const Port*> ports_;
};

// The send side of one connection: QPs created up front (their numbers travel in our HELLO), connected to the
// receiver's once it proved itself.
class IbSendSetup final : public ConnectionSetup {
 public:
  IbSendSetup(std::vector<const Port*> ports, const CommConfig& config)
      : comm(std::make_unique<IbSendComm>(std::move(ports))), config(config) {}
  Status onPeerKnown(const Handshake& hs, std::vector<uint8_t>*) override {
    ConnBlob peer;
    std::string why;
    Status st = decodeBlob(hs.peer().blob, &peer, &why);
    if (st == Status::Ok) {
      comm->setPeerMembers(int(peer.devs.size()));
      st = comm->connectQps(peer, qpTuningFromParams(config.trafficClass), &why);
    }
    if (st != Status::Ok) ICN_WARN(subsys::Net, "ib connect to %s: %s", hs.peerName().c_str(), why.c_str());
    return st;
  }
  std::unique_ptr<IbSendComm> comm;
  CommConfig config;
};

class IbListenComm final : public ListenComm {
 public:
  IbListenComm(IbTransport& t, int dev, std::unique_ptr<OobListener> l)
      : t_(t), dev_(dev), driver_(std::move(l), kMaxSetups) {}
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  IbTransport& t_;
  int dev_;
  AcceptDriver<IbRecvSetup> driver_;
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
  std::unique_ptr<IbRecvSetup> setup;
  ICN_CHECK(driver_.poll(
      [&](std::unique_ptr<IbRecvSetup>* s) {
        *s = std::make_unique<IbRecvSetup>(t_.portsOf(dev_));
        return Status::Ok;
      },
      &hs, &setup));
  if (!hs) return Status::Ok;
  const Hello peer = hs->peer();
  std::string name = hs->peerName();
  setup->comm->start(ControlChannel(hs->takeFd(), name), netCommInfo(peer, driver_.commId(), false));
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "ib receive connection from %s (rank %d) on %s: %d QP(s)", name.c_str(), peer.rank,
             t_.props(dev_).name.c_str(), setup->comm->qpCount());
  *out = std::move(setup->comm);
  return Status::Ok;
}

Status IbTransport::listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) {
  if (!validDev(dev, "listen")) return Status::InvalidArgument;
  std::unique_ptr<OobListener> l;
  ICN_CHECK(OobListener::open(kTransportIb, config.commId, 1, handle, &l));
  *out = std::make_unique<IbListenComm>(*this, dev, std::move(l));
  return Status::Ok;
}

Status IbTransport::connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  if (!validDev(dev, "connect")) return Status::InvalidArgument;
  std::unique_ptr<PendingConnection<IbSendSetup>> pc;
  ICN_CHECK(driveConnect<IbSendSetup>(
      handle, kTransportIb, config.commId,
      [&](std::unique_ptr<IbSendSetup>* s, std::vector<uint8_t>* blob) {
        *s = std::make_unique<IbSendSetup>(portsOf(dev), config);
        std::string why;
        if (Status st = (*s)->comm->init(qpsPerConnection(int(devs_[dev].members.size())), &why); st != Status::Ok) {
          ICN_WARN(subsys::Net, "ib connect on %s: %s", devs_[dev].props.name.c_str(), why.c_str());
          return st;
        }
        *blob = encodeBlob((*s)->comm->localBlob());
        return Status::Ok;
      },
      &pc));
  if (!pc) return Status::Ok;  // NCCL calls again
  Handshake& hs = pc->oob->handshake();
  IbSendSetup& s = *pc->setup;
  std::string name = hs.peerName();
  s.comm->start(ControlChannel(hs.takeFd(), name), netCommInfo(hs.peer(), s.config.commId, true));
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "ib send connection to %s (rank %d) on %s: %d QP(s)", name.c_str(), hs.peer().rank,
             devs_[dev].props.name.c_str(), s.comm->qpCount());
  *out = std::move(s.comm);
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
