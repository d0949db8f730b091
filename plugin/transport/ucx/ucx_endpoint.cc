#include "transport/ucx/ucx_endpoint.h"

#include "core/log.h"
#include "transport/ucx/ucx_context.h"

namespace icn::ucx {
namespace {
// Only endpoints of connections that never completed close here; open comms close through the Reaper.
constexpr int kAbortTimeoutMs = 100;

void release(ucs_status_ptr_t& r) {
  if (r && !UCS_PTR_IS_ERR(r)) ucx().request_free(r);
  r = nullptr;
}

// Ok/InProgress/error of one request; frees it once finished.
ucs_status_t settle(ucs_status_ptr_t& r) {
  if (!r) return UCS_OK;
  if (UCS_PTR_IS_ERR(r)) {
    ucs_status_t st = UCS_PTR_STATUS(r);
    r = nullptr;
    return st;
  }
  ucs_status_t st = ucx().request_check_status(r);
  if (st != UCS_INPROGRESS) release(r);
  return st;
}
}  // namespace

void Endpoint::onError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* e = static_cast<Endpoint*>(arg);
  e->failed_ = true;
  e->failure_ = status;
}

Status Endpoint::create(Worker& worker, std::span<const uint8_t> remoteAddress, const std::string& peer,
                        std::unique_ptr<Endpoint>* out) {
  if (remoteAddress.empty()) {
    ICN_WARN(subsys::Net, "%s sent no UCX worker address", peer.c_str());
    return Status::RemoteError;
  }
  std::unique_ptr<Endpoint> e(new Endpoint(worker, peer));
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER;  // the handler still reports failures UCX notices itself
  p.address = reinterpret_cast<const ucp_address_t*>(remoteAddress.data());
  // Peer failure is detected by our control socket, not by UCX: UCX's PEER error mode excludes the
  // shared-memory transports ("no peer failure handler"), which are the fast path inside a host.
  p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  p.err_handler.cb = &Endpoint::onError;
  p.err_handler.arg = e.get();
  ucs_status_t st = ucx().ep_create(worker.get(), &p, &e->ep_);
  if (st != UCS_OK) {
    ICN_WARN(subsys::Net, "ucp_ep_create to %s: %s", peer.c_str(), statusString(st));
    return Status::RemoteError;
  }
  *out = std::move(e);
  return Status::Ok;
}

void Endpoint::startWireup() {
  ucp_request_param_t p{};
  probe_ = ucx().tag_send_nbx(ep_, nullptr, 0, kWireupTag, &p);
  flush_ = ucx().ep_flush_nbx(ep_, &p);
}

Status Endpoint::pollWireup(bool* done) {
  *done = false;
  worker_.progress();
  ucs_status_t a = settle(probe_), b = settle(flush_);
  ucs_status_t bad = a != UCS_OK && a != UCS_INPROGRESS ? a : b != UCS_OK && b != UCS_INPROGRESS ? b : UCS_OK;
  if (failed_ && bad == UCS_OK) bad = failure_;
  if (bad != UCS_OK) {
    ICN_WARN(subsys::Net, "UCX wire-up with %s failed: %s", peer_.c_str(), statusString(bad));
    return Status::RemoteError;
  }
  *done = !probe_ && !flush_;
  return Status::Ok;
}

ucs_status_ptr_t Endpoint::startFlush() {
  release(probe_);
  release(flush_);
  if (!ep_ || failed_) return nullptr;  // nothing can reach a failed peer
  ucp_request_param_t p{};
  return ucx().ep_flush_nbx(ep_, &p);
}

ucs_status_ptr_t Endpoint::forceClose() {
  if (!ep_) return nullptr;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucx().ep_close_nbx(ep_, &p);
  ep_ = nullptr;
  return r;
}

Endpoint::~Endpoint() {
  release(probe_);
  release(flush_);
  if (!ep_) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;  // a connection that never completed has nothing to deliver
  ucs_status_t st = waitRequest(worker_, ucx().ep_close_nbx(ep_, &p), kAbortTimeoutMs);
  if (st != UCS_OK && st != UCS_ERR_CANCELED && st != UCS_ERR_ENDPOINT_TIMEOUT)
    ICN_TRACE(subsys::Net, "closing UCX endpoint to %s: %s", peer_.c_str(), statusString(st));
}

ucs_status_ptr_t postWireupProbe(Worker& worker) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return ucx().tag_recv_nbx(worker.get(), nullptr, 0, kWireupTag, ~ucp_tag_t{0}, &p);
}

}  // namespace icn::ucx
