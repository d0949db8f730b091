#include "transport/ucx/ucx_transport.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <fstream>

#include "core/connect_driver.h"
#include "core/host_nic.h"
#include "core/log.h"
#include "core/oob.h"
#include "core/params.h"
#include "core/wire.h"
#include "transport/ucx/ucx_comm.h"
#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_lanes.h"
#include "transport/ucx/ucx_reaper.h"

namespace icn::ucx {
namespace {

// Connections past their peer's proof whose UCX wire-up is still running, per listen comm: each holds a
// worker, so the listener takes no more proven peers from its handshakes until one finishes or fails.
constexpr size_t kMaxSetups = 16;

class UcxTransport;

// Handshake blob, both directions: u32 length | UCX worker address.
struct Blob {
  std::vector<uint8_t> workerAddress;
};

std::vector<uint8_t> encodeBlob(const std::vector<uint8_t>& addr) {
  WireWriter w;
  w.put<uint32_t>(static_cast<uint32_t>(addr.size()));
  w.bytes(addr);
  return std::move(w.buffer());
}

Status decodeBlob(const std::vector<uint8_t>& raw, Blob* out, const std::string& peer) {
  WireReader r(raw);
  uint32_t len = 0;
  std::span<const uint8_t> addr;
  if (!r.get(&len) || !r.bytes(len, &addr) || !r.atEnd() || len == 0) {
    ICN_WARN(subsys::Net, "%s sent a malformed UCX connection blob (%zu bytes)", peer.c_str(), raw.size());
    return Status::RemoteError;
  }
  out->workerAddress.assign(addr.begin(), addr.end());
  return Status::Ok;
}

// One connection being set up, on either side: a worker of its own, then UCX wire-up in both directions once the
// peer proved itself. The acceptor answers with its worker address; the connector's went out in its HELLO.
class UcxSetup final : public ConnectionSetup {
 public:
  UcxSetup(std::unique_ptr<Worker> w, std::vector<uint8_t> address)
      : worker(std::move(w)), address_(std::move(address)) {}
  ~UcxSetup() override {
    if (probeRecv && !UCS_PTR_IS_ERR(probeRecv)) {
      if (ucx().request_check_status(probeRecv) == UCS_INPROGRESS) ucx().request_cancel(worker->get(), probeRecv);
      ucx().request_free(probeRecv);
    }
  }
  // A bad blob is the peer's fault (logged with its name).
  Status onPeerKnown(const Handshake& hs, std::vector<uint8_t>* answer) override {
    Blob peerBlob;
    ICN_CHECK(decodeBlob(hs.peer().blob, &peerBlob, hs.peerName()));
    ICN_CHECK(Endpoint::create(*worker, peerBlob.workerAddress, hs.peerName(), &ep));
    probeRecv = postWireupProbe(*worker);
    ep->startWireup();
    acceptor_ = answer != nullptr;
    if (answer) *answer = encodeBlob(address_);
    else logLanesOnce(ep->get(), hs.peerName());
    return Status::Ok;
  }
  // The connector is ready once its probe went out, its flush finished and the acceptor's probe arrived: its lanes
  // to the acceptor carry traffic and the acceptor's reach it. The acceptor only receives: it is ready once the
  // connector's probe arrived (its READY says our probe reached it too). Waiting for the acceptor's own flush as
  // well would hang a connector that sends once and leaves before UCX finished wiring the acceptor's lanes.
  Status poll(bool* ready) override {
    *ready = false;
    if (!ep) return Status::Ok;
    bool mine = false;
    ICN_CHECK(ep->pollWireup(&mine));
    if (UCS_PTR_IS_ERR(probeRecv)) return Status::RemoteError;
    bool theirs = !probeRecv || ucx().request_check_status(probeRecv) != UCS_INPROGRESS;
    *ready = theirs && (mine || acceptor_);
    return Status::Ok;
  }
  // A fresh worker and its address (local failures are ours to report).
  static Status create(ucp_context_h ctx, std::unique_ptr<UcxSetup>* out) {
    std::unique_ptr<Worker> w;
    std::vector<uint8_t> addr;
    ICN_CHECK(Worker::create(ctx, &w));
    ICN_CHECK(w->address(&addr));
    *out = std::make_unique<UcxSetup>(std::move(w), std::move(addr));
    return Status::Ok;
  }
  const std::vector<uint8_t>& address() const { return address_; }

  std::unique_ptr<Worker> worker;
  std::unique_ptr<Endpoint> ep;
  ucs_status_ptr_t probeRecv = nullptr;  // the peer's wire-up probe

 private:
  std::vector<uint8_t> address_;
  bool acceptor_ = false;
};

class UcxListenComm final : public ListenComm {
 public:
  UcxListenComm(UcxTransport& t, std::unique_ptr<OobListener> l) : t_(t), driver_(std::move(l), kMaxSetups) {}
  Status accept(std::unique_ptr<RecvComm>* out) override;

 private:
  UcxTransport& t_;
  AcceptDriver<UcxSetup> driver_;
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
  Reaper* reaper() { return &reaper_; }
  void quiesce() override { reaper_.drain(); }

 private:
  std::unique_ptr<Context> ctx_;
  DeviceProps props_;
  Reaper reaper_;  // declared after the context: pending closes finish before the context goes
};

Status UcxListenComm::accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  t_.reaper()->poll();
  std::unique_ptr<Handshake> hs;
  std::unique_ptr<UcxSetup> s;
  ICN_CHECK(driver_.poll([&](std::unique_ptr<UcxSetup>* n) { return UcxSetup::create(t_.context(), n); }, &hs, &s));
  if (!hs) return Status::Ok;
  const Hello peer = hs->peer();
  std::string name = hs->peerName();
  NetCommInfo info = netCommInfo(peer, driver_.commId(), false);
  const bool log = params::getInt(params::Id::LogDetail) >= 1;
  std::string lanes = log ? describeLanes(s->ep->get()) : std::string();
  *out = std::make_unique<UcxRecvComm>(std::move(s->worker), std::move(s->ep), ControlChannel(hs->takeFd(), name),
                                       info, t_.ptrSupport(), t_.reaper());
  if (log)
    ICN_INFO(subsys::Net, "UCX receive connection from %s (rank %d) ready, lanes %s", name.c_str(), peer.rank,
             lanes.c_str());
  return Status::Ok;
}

Status UcxTransport::listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) {
  if (dev != 0) {
    ICN_WARN(subsys::Net, "listen: device %d does not exist (UCX transport has 1 device)", dev);
    return Status::InvalidArgument;
  }
  std::unique_ptr<OobListener> l;
  ICN_CHECK(OobListener::open(kTransportUcx, config.commId, 1, handle, &l));
  *out = std::make_unique<UcxListenComm>(*this, std::move(l));
  return Status::Ok;
}

Status UcxTransport::connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  reaper_.poll();
  if (dev != 0) {
    ICN_WARN(subsys::Net, "connect: device %d does not exist (UCX transport has 1 device)", dev);
    return Status::InvalidArgument;
  }
  std::unique_ptr<PendingConnection<UcxSetup>> pc;
  ICN_CHECK(driveConnect<UcxSetup>(
      handle, kTransportUcx, config.commId,
      [&](std::unique_ptr<UcxSetup>* s, std::vector<uint8_t>* blob) {
        ICN_CHECK(UcxSetup::create(context(), s));
        *blob = encodeBlob((*s)->address());
        return Status::Ok;
      },
      &pc));
  if (!pc) return Status::Ok;  // NCCL calls again
  Handshake& hs = pc->oob->handshake();
  UcxSetup& s = *pc->setup;
  std::string name = hs.peerName();
  NetCommInfo info = netCommInfo(hs.peer(), config.commId, true);
  const bool log = params::getInt(params::Id::LogDetail) >= 1;
  std::string lanes = log ? describeLanes(s.ep->get()) : std::string();
  auto comm = std::make_unique<UcxSendComm>(std::move(s.worker), std::move(s.ep), ControlChannel(hs.takeFd(), name),
                                            info, ptrSupport(), &reaper_);
  const size_t rndv = rendezvousFrom(comm->endpoint());
  comm->setRendezvousFrom(rndv);
  if (log) {
    ICN_INFO(subsys::Net, "UCX send connection to %s (rank %d) ready, lanes %s", name.c_str(), hs.peer().rank,
             lanes.c_str());
    if (rndv == SIZE_MAX)
      ICN_INFO(subsys::Net, "UCX sends to %s: no rendezvous for host messages (UCX_RNDV_THRESH)", name.c_str());
    else
      ICN_INFO(subsys::Net, "UCX sends to %s: host messages from %zu bytes go by rendezvous (UCX_RNDV_THRESH)",
               name.c_str(), rndv);
  }
  *out = std::move(comm);
  return Status::Ok;
}

// The NIC behind the handshake interface tells NCCL where the traffic leaves the host.
DeviceProps probeDevice(const Context& ctx) {
  DeviceProps p;
  HostNic nic = probeHostNic("ucx", &p);
  p.ptrSupport = kMemHost | (ctx.supportsCuda() ? kMemCuda : 0);
  p.latencyUs = 0.f;
  p.maxComms = 65536;
  p.maxRecvs = kMaxRecvs;
  p.maxP2pBytes = p.maxCollBytes = (size_t{1} << 31) - 1;  // test() reports sizes as int
  p.members = {0};
  ICN_INFO(subsys::Net | subsys::Init,
           "UCX %s device %s: interface %s (%s), speed %d Mbps%s, PCI %s, pointers %s", ctx.version().c_str(),
           p.name.c_str(), nic.ifname.c_str(), nic.addr.str().c_str(), p.speedMbps,
           nic.speedKnown ? "" : " (interface reports none: virtual/loopback, assumed)",
           p.pciPath.empty() ? "none (NCCL attaches the NIC to the CPU)" : p.pciPath.c_str(),
           ctx.supportsCuda() ? "host+cuda (UCX has a CUDA memory module)" : "host only (UCX has no CUDA support)");
  return p;
}

}  // namespace

Status createTransport(std::unique_ptr<Transport>* out, std::string* whyNot) {
  if (!loadUcx(whyNot)) return Status::SystemError;
  std::unique_ptr<Context> ctx;
  ICN_CHECK(Context::create(&ctx, whyNot));
  DeviceProps props = probeDevice(*ctx);
  *out = std::make_unique<UcxTransport>(std::move(ctx), std::move(props));
  return Status::Ok;
}

}  // namespace icn::ucx
