// UCX (libucs, libuct, libucp), loaded at run time: the functions the transport calls, resolved once per
// process. Types come from UCX's headers (decltype of each declaration), so a mismatch fails to compile.
#pragma once
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <string>

namespace icn::ucx {

struct UcxApi {
  decltype(&ucs_status_string) status_string;
  decltype(&uct_query_components) query_components;
  decltype(&uct_component_query) component_query;
  decltype(&uct_release_component_list) release_component_list;
  decltype(&ucp_get_version) get_version;
  decltype(&ucp_config_read) config_read;
  decltype(&ucp_config_modify) config_modify;
  decltype(&ucp_config_release) config_release;
  decltype(&ucp_init_version) init_version;
  decltype(&ucp_cleanup) cleanup;
  decltype(&ucp_context_query) context_query;
  decltype(&ucp_worker_create) worker_create;
  decltype(&ucp_worker_destroy) worker_destroy;
  decltype(&ucp_worker_get_address) worker_get_address;
  decltype(&ucp_worker_release_address) worker_release_address;
  decltype(&ucp_worker_progress) worker_progress;
  decltype(&ucp_ep_create) ep_create;
  decltype(&ucp_ep_close_nbx) ep_close_nbx;
  decltype(&ucp_ep_flush_nbx) ep_flush_nbx;
  decltype(&ucp_ep_print_info) ep_print_info;
  decltype(&ucp_tag_send_nbx) tag_send_nbx;
  decltype(&ucp_tag_recv_nbx) tag_recv_nbx;
  decltype(&ucp_request_check_status) request_check_status;
  decltype(&ucp_request_cancel) request_cancel;
  decltype(&ucp_request_free) request_free;
};

// Loads UCX on the first call; null with *why ("libucp.so.0 not found", "libucp.so.0 lacks ucp_tag_send_nbx")
// when it cannot. Thread-safe; the answer never changes within a process.
const UcxApi* loadUcx(std::string* why);

// The loaded table; only after loadUcx succeeded (every UCX object in the transport was made through it).
const UcxApi& ucx();

// ucp.h's ucp_init is an inline that passes the API version the headers describe; this does the same.
ucs_status_t initContext(const ucp_params_t* params, const ucp_config_t* config, ucp_context_h* ctx);

}  // namespace icn::ucx
