// RAII UCP endpoint with peer-failure tracking and an explicit wire-up step.
//
// Both sides of a connection create an endpoint to the other's worker (UCX matches the pair into one
// bidirectional connection) and finish wire-up during the handshake, while both peers are known to be
// alive. Lazy wire-up after a peer died trips an assertion in UCX 1.13's TCP transport
// (openucx/ucx#8175), and it also keeps connection latency out of the first transfer.
#pragma once
#include "transport/ucx/ucx_lib.h"

#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "transport/ucx/ucx_worker.h"

namespace icn::ucx {

// NCCL tags are 32-bit: bit 63 marks our internal wire-up probe.
constexpr ucp_tag_t kWireupTag = ucp_tag_t{1} << 63;

class Endpoint {
 public:
  static Status create(Worker& worker, std::span<const uint8_t> remoteAddress, const std::string& peer,
                       std::unique_ptr<Endpoint>* out);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ucp_ep_h get() const { return ep_; }
  bool failed() const { return failed_; }
  ucs_status_t failure() const { return failure_; }

  // Sends a zero-byte probe on kWireupTag and flushes; pollWireup reports completion.
  void startWireup();
  Status pollWireup(bool* done);

  // Closing is two steps, both progressed by the caller (see Reaper): a flush, which completes once
  // everything sent has left this process, then a forced close, which needs nothing from the peer. UCX's
  // graceful close also waits for the peer's close handshake, which over TCP often never comes.
  ucs_status_ptr_t startFlush();
  ucs_status_ptr_t forceClose();  // gives up the endpoint

 private:
  Endpoint(Worker& w, std::string peer) : worker_(w), peer_(std::move(peer)) {}
  static void onError(void* arg, ucp_ep_h ep, ucs_status_t status);

  Worker& worker_;
  std::string peer_;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
  ucs_status_t failure_ = UCS_OK;
  ucs_status_ptr_t probe_ = nullptr;
  ucs_status_ptr_t flush_ = nullptr;
};

// Posts the receive for the peer's wire-up probe.
ucs_status_ptr_t postWireupProbe(Worker& worker);

}  // namespace icn::ucx
