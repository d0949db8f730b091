#include "transport/ucx/ucx_transport.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <fstream>

#include "core/log.h"
#include "core/oob.h"
#include "core/params.h"
#include "transport/ucx/ucx_comm.h"
#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_lanes.h"

namespace icn::ucx {
namespace {

constexpr int kUnknownSpeedMbps = 100000;

class UcxTransport;

class UcxListenComm final : public ListenComm {
 public:
  UcxListenComm(UcxTransport& t, std::unique_ptr<OobListener> l) : t_(t), listener_(std::move(l)) {}
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  UcxTransport& t_;
  std::unique_ptr<OobListener> listener_;
  std::unique_ptr<Handshake> hs_;
  std::unique_ptr<Worker> worker_;
};

struct PendingConnect {
  std::unique_ptr<OobConnector> oob;
  std::unique_ptr<Worker> worker;
  std::unique_ptr<UcxSendComm::EpError> epErr;
  ucp_ep_h ep = nullptr;
  CommConfig config;
  ~PendingConnect() {
    if (ep && worker) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      waitRequest(*worker, ucp_ep_close_nbx(ep, &p), 1000);
    }
  }
};

class UcxTransport final : public Transport {
 public:
  UcxTransport(std::unique_ptr<Context> ctx, DeviceProps props) : ctx_(std::move(ctx)), props_(std::move(props)) {}
  const char* name() const override { return "ucx"; }
  int deviceCount() const override { return 1; }
  Status getProperties(int dev, DeviceProps* out) const override {
    if (dev != 0) return Status::InvalidArgument;
    *out = props_;
    return Status::Ok;
  }
  Status listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) override;
  Status connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) override;

  ucp_context_h context() const { return ctx_->get(); }
  int ptrSupport() const { return props_.ptrSupport; }

 private:
  std::unique_ptr<Context> ctx_;
  DeviceProps props_;
};

NetCommInfo commInfo(const Hello& peer, uint64_t commId, bool isSend, const std::string& peerName) {
  NetCommInfo info;
  info.commId = commId;
  info.localRank = netstats::localRank(commId);
  info.peerRank = peer.rank;
  info.peer = peer.host + ":" + std::to_string(peer.pid);
  info.isSend = isSend;
  return info;
}

Status UcxListenComm::accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  if (!hs_) {
    ICN_CHECK(listener_->poll(&hs_));
    if (!hs_) return Status::Ok;
    std::vector<uint8_t> addr;
    Status st = Worker::create(t_.context(), &worker_);
    if (st == Status::Ok) st = worker_->address(&addr);
    if (st != Status::Ok) {
      hs_.reset();
      return st;
    }
    hs_->confirm(std::move(addr));
  }
  Handshake::Phase phase;
  if (hs_->progress(&phase) != Status::Ok) {
    hs_.reset();
    worker_.reset();
    return Status::RemoteError;
  }
  if (phase != Handshake::Phase::Done) return Status::Ok;
  const Hello peer = hs_->peer();
  std::string name = hs_->peerName();
  NetCommInfo info = commInfo(peer, listener_->commId(), false, name);
  auto comm = std::make_unique<UcxRecvComm>(std::move(worker_), ControlChannel(hs_->takeFd(), name), info,
                                            t_.ptrSupport());
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "UCX receive connection from %s (rank %d) ready", name.c_str(), peer.rank);
  hs_.reset();
  *out = std::move(comm);
  return Status::Ok;
}

Status UcxTransport::listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) {
  if (dev != 0) {
    ICN_WARN(subsys::Net, "listen: device %d does not exist (UCX transport has 1 device)", dev);
    return Status::InvalidArgument;
  }
  std::unique_ptr<OobListener> l;
  ICN_CHECK(OobListener::open(kTransportUcx, config.commId, handle, &l));
  *out = std::make_unique<UcxListenComm>(*this, std::move(l));
  return Status::Ok;
}

Status UcxTransport::connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  if (dev != 0) {
    ICN_WARN(subsys::Net, "connect: device %d does not exist (UCX transport has 1 device)", dev);
    return Status::InvalidArgument;
  }
  std::unique_ptr<PendingConnect> pc(loadPending<PendingConnect>(handle));
  storePending<PendingConnect>(handle, nullptr);
  if (!pc) {
    pc = std::make_unique<PendingConnect>();
    pc->config = config;
    ICN_CHECK(OobConnector::start(handle, kTransportUcx, makeLocalHello(kTransportUcx, config.commId, {}), &pc->oob));
  }
  Handshake::Phase phase;
  ICN_CHECK(pc->oob->progress(&phase));  // failure: pc is destroyed, the handle is clean for a retry
  if (phase == Handshake::Phase::PeerKnown && !pc->ep) {
    const Hello& peer = pc->oob->handshake().peer();
    ICN_CHECK(Worker::create(context(), &pc->worker));
    pc->epErr = std::make_unique<UcxSendComm::EpError>();
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peer.blob.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &UcxSendComm::onEpError;
    ep.err_handler.arg = pc->epErr.get();
    if (peer.blob.empty()) {
      ICN_WARN(subsys::Net, "connect to %s: peer sent no UCX worker address", pc->oob->handshake().peerName().c_str());
      return Status::RemoteError;
    }
    ucs_status_t st = ucp_ep_create(pc->worker->get(), &ep, &pc->ep);
    if (st != UCS_OK) {
      ICN_WARN(subsys::Net, "ucp_ep_create to %s: %s", pc->oob->handshake().peerName().c_str(), statusString(st));
      return Status::RemoteError;
    }
    logLanesOnce(pc->ep, pc->oob->handshake().peerName());
    pc->oob->handshake().confirm();
    ICN_CHECK(pc->oob->progress(&phase));
  }
  if (phase != Handshake::Phase::Done) {
    storePending(handle, pc.release());
    return Status::Ok;
  }
  Handshake& hs = pc->oob->handshake();
  std::string name = hs.peerName();
  NetCommInfo info = commInfo(hs.peer(), pc->config.commId, true, name);
  auto comm = std::make_unique<UcxSendComm>(std::move(pc->worker), std::exchange(pc->ep, nullptr), std::move(pc->epErr),
                                            ControlChannel(hs.takeFd(), name), info, ptrSupport());
  if (params::getInt(params::Id::LogDetail) >= 1)
    ICN_INFO(subsys::Net, "UCX send connection to %s (rank %d) ready", name.c_str(), hs.peer().rank);
  *out = std::move(comm);
  return Status::Ok;
}

// The NIC behind the handshake interface tells NCCL where the traffic leaves the host.
DeviceProps probeDevice(const Context& ctx) {
  DeviceProps p;
  SockAddr addr;
  std::string ifname;
  if (pickInterface(&addr, &ifname) != Status::Ok) ifname = "lo";
  p.name = "ucx-" + ifname;
  char real[PATH_MAX];
  std::string dev = "/sys/class/net/" + ifname + "/device";
  if (realpath(dev.c_str(), real)) p.pciPath = real;
  int speed = -1;
  std::ifstream("/sys/class/net/" + ifname + "/speed") >> speed;
  p.speedMbps = speed > 0 ? speed : kUnknownSpeedMbps;
  p.ptrSupport = kMemHost | (ctx.supportsCuda() ? kMemCuda : 0);
  p.latencyUs = 0.f;
  p.maxComms = 65536;
  p.maxRecvs = kMaxRecvs;
  p.maxP2pBytes = p.maxCollBytes = (size_t{1} << 31) - 1;  // test() reports sizes as int
  p.members = {0};
  ICN_INFO(subsys::Net | subsys::Init,
           "UCX %s device %s: interface %s (%s), speed %d Mbps%s, PCI %s, pointers %s", ctx.version().c_str(),
           p.name.c_str(), ifname.c_str(), addr.str().c_str(), p.speedMbps,
           speed > 0 ? "" : " (interface reports none: virtual/loopback, assumed)",
           p.pciPath.empty() ? "none (NCCL attaches the NIC to the CPU)" : p.pciPath.c_str(),
           ctx.supportsCuda() ? "host+cuda (UCX has a CUDA memory module)" : "host only (UCX has no CUDA support)");
  return p;
}

}  // namespace

Status createTransport(std::unique_ptr<Transport>* out, std::string* whyNot) {
  std::unique_ptr<Context> ctx;
  ICN_CHECK(Context::create(&ctx, whyNot));
  DeviceProps props = probeDevice(*ctx);
  *out = std::make_unique<UcxTransport>(std::move(ctx), std::move(props));
  return Status::Ok;
}

}  // namespace icn::ucx
