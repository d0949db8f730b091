// One UCP worker per comm: each comm is driven by one NCCL proxy thread at a time, so workers need no
// locks and progress of one comm never waits behind another.
#pragma once
#include "transport/ucx/ucx_lib.h"

#include <memory>
#include <vector>

#include "core/status.h"

namespace icn::ucx {

class Worker {
 public:
  static Status create(ucp_context_h ctx, std::unique_ptr<Worker>* out);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ucp_worker_h get() const { return w_; }
  // Serialised worker address for the peer (sent in the handshake blob).
  Status address(std::vector<uint8_t>* out) const;
  void progress() {
    while (ucx().worker_progress(w_)) {
    }
  }

 private:
  Worker() = default;
  ucp_worker_h w_ = nullptr;
};

// Blocks (progressing the worker) until the UCX request completes or the deadline passes; frees it.
ucs_status_t waitRequest(Worker& w, ucs_status_ptr_t req, int timeoutMs);

}  // namespace icn::ucx
