#include "transport/ucx/ucx_context.h"

#include <unistd.h>  // environ

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <uct/api/uct.h>

#include "core/log.h"
#include "core/params.h"

namespace icn::ucx {

const char* statusString(ucs_status_t s) { return ucx().status_string(s); }

namespace {
constexpr const char* kIbQueueLen = "256";

// Applies an ICN default for a UCX variable the user did not set themselves.
void fillGap(ucp_config_t* cfg, const char* ucxVar, const char* ucpName, params::Id id) {
  const std::string& v = params::getString(id);
  if (v.empty() || std::getenv(ucxVar)) return;
  ucs_status_t st = ucx().config_modify(cfg, ucpName, v.c_str());
  if (st != UCS_OK)
    ICN_WARN(subsys::Net, "cannot apply %s=%s to UCX: %s", ucxVar, v.c_str(), ucx().status_string(st));
  else
    ICN_INFO(subsys::Net | subsys::Init, "UCX %s=%s (from ICN settings)", ucxVar, v.c_str());
}

// Each comm has its own UCP worker serving a single endpoint, but UCX sizes an IB interface's receive queue
// for a worker shared by many peers: 4095 receive buffers of 8 KiB, 32 MiB allocated and registered per rc
// interface, about 37 MiB per comm with rc_verbs + ud_verbs. With 24 comms per process that exhausted the
// 2 GiB Soft-RoCE VM (OOM kill), and on rxe each registration of that much memory made connect/close take
// seconds. One endpoint needs far fewer: 256 buffers (and the credit window to match, so the peer never
// outruns them). Skipped when the user sets any UCX receive queue or credit window variable.
//
// Only where UCX can use IB at all: a UCX without its IB module (or a host without RDMA devices) rejects the
// keys at worker creation with an "invalid configurations" warning on every worker.
bool ucxCanUseIb() {
  std::error_code ec;
  std::filesystem::directory_iterator devs("/sys/class/infiniband", ec);
  if (ec || devs == std::filesystem::directory_iterator()) return false;
  // UCX's own list of transport components (loading its modules): "ib" is there only with the IB module.
  uct_component_h* comps = nullptr;
  unsigned n = 0;
  if (ucx().query_components(&comps, &n) != UCS_OK) return false;
  bool ib = false;
  for (unsigned i = 0; i < n && !ib; ++i) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    ib = ucx().component_query(comps[i], &attr) == UCS_OK && std::string_view(attr.name) == "ib";
  }
  ucx().release_component_list(comps);
  return ib;
}

void sizeIbQueuesForOneEndpoint(ucp_config_t* cfg) {
  if (!ucxCanUseIb()) return;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.starts_with("UCX_") && (kv.find("RX_QUEUE_LEN=") != kv.npos || kv.find("FC_WND_SIZE=") != kv.npos)) return;
  }
  for (const char* key : {"IB_RX_QUEUE_LEN", "RC_FC_WND_SIZE"}) {
    ucs_status_t st = ucx().config_modify(cfg, key, kIbQueueLen);
    if (st != UCS_OK) ICN_WARN(subsys::Net, "cannot apply UCX_%s=%s: %s", key, kIbQueueLen, ucx().status_string(st));
  }
  ICN_INFO(subsys::Net | subsys::Init, "UCX IB_RX_QUEUE_LEN=RC_FC_WND_SIZE=%s (one endpoint per worker)", kIbQueueLen);
}
}  // namespace

Status Context::create(std::unique_ptr<Context>* out, std::string* why) {
  std::unique_ptr<Context> c(new Context());
  unsigned major, minor, release;
  ucx().get_version(&major, &minor, &release);
  c->version_ = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);

  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucx().config_read(nullptr, nullptr, &cfg);
  if (st != UCS_OK) {
    *why = std::string("ucp_config_read: ") + ucx().status_string(st);
    return Status::SystemError;
  }
  fillGap(cfg, "UCX_TLS", "TLS", params::Id::UcxTls);
  fillGap(cfg, "UCX_RNDV_THRESH", "RNDV_THRESH", params::Id::UcxRndvThresh);
  sizeIbQueuesForOneEndpoint(cfg);

  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  p.features = UCP_FEATURE_TAG;
  p.mt_workers_shared = 1;  // comms (one worker each) are created from several proxy threads
  p.name = "icn";
  st = initContext(&p, cfg, &c->ctx_);
  ucx().config_release(cfg);
  if (st != UCS_OK) {
    *why = std::string("ucp_init: ") + ucx().status_string(st);
    return Status::SystemError;
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucx().context_query(c->ctx_, &attr) == UCS_OK)
    c->cuda_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  *out = std::move(c);
  return Status::Ok;
}

Context::~Context() {
  if (ctx_) ucx().cleanup(ctx_);
}

}  // namespace icn::ucx
