#include "transport/ucx/ucx_context.h"

#include <cstdlib>

#include "core/log.h"
#include "core/params.h"

namespace icn::ucx {

const char* statusString(ucs_status_t s) { return ucs_status_string(s); }

namespace {
// Applies an ICN default for a UCX variable the user did not set themselves.
void fillGap(ucp_config_t* cfg, const char* ucxVar, const char* ucpName, params::Id id) {
  const std::string& v = params::getString(id);
  if (v.empty() || std::getenv(ucxVar)) return;
  ucs_status_t st = ucp_config_modify(cfg, ucpName, v.c_str());
  if (st != UCS_OK)
    ICN_WARN(subsys::Net, "cannot apply %s=%s to UCX: %s", ucxVar, v.c_str(), ucs_status_string(st));
  else
    ICN_INFO(subsys::Net | subsys::Init, "UCX %s=%s (from ICN settings)", ucxVar, v.c_str());
}
}  // namespace

Status Context::create(std::unique_ptr<Context>* out, std::string* why) {
  std::unique_ptr<Context> c(new Context());
  unsigned major, minor, release;
  ucp_get_version(&major, &minor, &release);
  c->version_ = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);

  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);
  if (st != UCS_OK) {
    *why = std::string("ucp_config_read: ") + ucs_status_string(st);
    return Status::SystemError;
  }
  fillGap(cfg, "UCX_TLS", "TLS", params::Id::UcxTls);
  fillGap(cfg, "UCX_RNDV_THRESH", "RNDV_THRESH", params::Id::UcxRndvThresh);

  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  p.features = UCP_FEATURE_TAG;
  p.mt_workers_shared = 1;  // comms (one worker each) are created from several proxy threads
  p.name = "icn";
  st = ucp_init(&p, cfg, &c->ctx_);
  ucp_config_release(cfg);
  if (st != UCS_OK) {
    *why = std::string("ucp_init: ") + ucs_status_string(st);
    return Status::SystemError;
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(c->ctx_, &attr) == UCS_OK)
    c->cuda_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  *out = std::move(c);
  return Status::Ok;
}

Context::~Context() {
  if (ctx_) ucp_cleanup(ctx_);
}

}  // namespace icn::ucx
