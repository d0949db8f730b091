// Which UCX transports (lanes) an endpoint uses, for the INFO log: "which transport and why".
#pragma once
#include "transport/ucx/ucx_lib.h"

#include <cstddef>
#include <string>

namespace icn::ucx {

// "posix/memory, tcp/lo" parsed from ucp_ep_print_info; empty when UCX prints nothing usable.
std::string describeLanes(ucp_ep_h ep);
// The smallest host-memory tag message UCX sends by rendezvous on this endpoint (the "<rndv>" step of the
// "tag_send:" line of ucp_ep_print_info); SIZE_MAX when UCX prints none.
size_t rendezvousFrom(ucp_ep_h ep);
// Logs the lanes at INFO the first time a given lane set is seen in this process.
void logLanesOnce(ucp_ep_h ep, const std::string& peer);

}  // namespace icn::ucx
