#include "transport/ucx/ucx_lib.h"


#include "transport/dynlib.h"
#include "transport/ucx/ucx_transport.h"

namespace icn::ucx {
namespace {

struct Loaded {
  dynlib::Library ucs, uct, ucp;
  UcxApi api{};
};

bool resolveAll(Loaded* l, std::string* why) {
  UcxApi* a = &l->api;
  return l->ucs.resolve(&a->status_string, "ucs_status_string", nullptr, why) &&
         l->uct.resolve(&a->query_components, "uct_query_components", nullptr, why) &&
         l->uct.resolve(&a->component_query, "uct_component_query", nullptr, why) &&
         l->uct.resolve(&a->release_component_list, "uct_release_component_list", nullptr, why) &&
         l->ucp.resolve(&a->get_version, "ucp_get_version", nullptr, why) &&
         l->ucp.resolve(&a->config_read, "ucp_config_read", nullptr, why) &&
         l->ucp.resolve(&a->config_modify, "ucp_config_modify", nullptr, why) &&
         l->ucp.resolve(&a->config_release, "ucp_config_release", nullptr, why) &&
         l->ucp.resolve(&a->init_version, "ucp_init_version", nullptr, why) &&
         l->ucp.resolve(&a->cleanup, "ucp_cleanup", nullptr, why) &&
         l->ucp.resolve(&a->context_query, "ucp_context_query", nullptr, why) &&
         l->ucp.resolve(&a->worker_create, "ucp_worker_create", nullptr, why) &&
         l->ucp.resolve(&a->worker_destroy, "ucp_worker_destroy", nullptr, why) &&
         l->ucp.resolve(&a->worker_get_address, "ucp_worker_get_address", nullptr, why) &&
         l->ucp.resolve(&a->worker_release_address, "ucp_worker_release_address", nullptr, why) &&
         l->ucp.resolve(&a->worker_progress, "ucp_worker_progress", nullptr, why) &&
         l->ucp.resolve(&a->ep_create, "ucp_ep_create", nullptr, why) &&
         l->ucp.resolve(&a->ep_close_nbx, "ucp_ep_close_nbx", nullptr, why) &&
         l->ucp.resolve(&a->ep_flush_nbx, "ucp_ep_flush_nbx", nullptr, why) &&
         l->ucp.resolve(&a->ep_print_info, "ucp_ep_print_info", nullptr, why) &&
         l->ucp.resolve(&a->tag_send_nbx, "ucp_tag_send_nbx", nullptr, why) &&
         l->ucp.resolve(&a->tag_recv_nbx, "ucp_tag_recv_nbx", nullptr, why) &&
         l->ucp.resolve(&a->request_check_status, "ucp_request_check_status", nullptr, why) &&
         l->ucp.resolve(&a->request_cancel, "ucp_request_cancel", nullptr, why) &&
         l->ucp.resolve(&a->request_free, "ucp_request_free", nullptr, why);
}

dynlib::Resident<Loaded> g_ucx;  // UCX also keeps its own modules (uct_ib, uct_cma...) loaded beneath these

}  // namespace

const UcxApi* loadUcx(std::string* why) {
  // libucp first: the transport's name for UCX being absent is the protocol library.
  const Loaded* l = g_ucx.get(
      [](Loaded* t, std::string* err) {
        return t->ucp.open("libucp.so.0", err) && t->uct.open("libuct.so.0", err) && t->ucs.open("libucs.so.0", err) &&
               resolveAll(t, err);
      },
      why);
  return l ? &l->api : nullptr;
}

bool libraryAvailable(std::string* why, std::string* version) {
  const UcxApi* a = loadUcx(why);
  if (!a) return false;
  unsigned major = 0, minor = 0, release = 0;
  a->get_version(&major, &minor, &release);
  *version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  return true;
}

const UcxApi& ucx() { return g_ucx->api; }

ucs_status_t initContext(const ucp_params_t* params, const ucp_config_t* config, ucp_context_h* ctx) {
  return ucx().init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, ctx);
}

}  // namespace icn::ucx
