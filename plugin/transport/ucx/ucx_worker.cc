#include "transport/ucx/ucx_worker.h"

#include <chrono>

#include "core/log.h"
#include "transport/ucx/ucx_context.h"

namespace icn::ucx {

Status Worker::create(ucp_context_h ctx, std::unique_ptr<Worker>* out) {
  std::unique_ptr<Worker> w(new Worker());
  ucp_worker_params_t p{};
  p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  p.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucs_status_t st = ucx().worker_create(ctx, &p, &w->w_);
  if (st != UCS_OK) {
    ICN_WARN(subsys::Net, "ucp_worker_create: %s", statusString(st));
    return Status::SystemError;
  }
  *out = std::move(w);
  return Status::Ok;
}

Worker::~Worker() {
  if (w_) ucx().worker_destroy(w_);
}

Status Worker::address(std::vector<uint8_t>* out) const {
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  ucs_status_t st = ucx().worker_get_address(w_, &addr, &len);
  if (st != UCS_OK) {
    ICN_WARN(subsys::Net, "ucp_worker_get_address: %s", statusString(st));
    return Status::SystemError;
  }
  auto* b = reinterpret_cast<const uint8_t*>(addr);
  out->assign(b, b + len);
  ucx().worker_release_address(w_, addr);
  return Status::Ok;
}

ucs_status_t waitRequest(Worker& w, ucs_status_ptr_t req, int timeoutMs) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  ucs_status_t st;
  while ((st = ucx().request_check_status(req)) == UCS_INPROGRESS) {
    w.progress();
    if (std::chrono::steady_clock::now() > deadline) {
      ucx().request_cancel(w.get(), req);
      w.progress();
      st = UCS_ERR_TIMED_OUT;
      break;
    }
  }
  ucx().request_free(req);
  return st;
}

}  // namespace icn::ucx
