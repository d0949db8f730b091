// ICN's own TCP transport: host memory over several TCP sockets per connection (lane 0 driven by NCCL's proxy
// thread for small messages, helper-thread lanes for large ones), set up and watched through the out-of-band
// handshake. Needs nothing but the kernel, so it is always available.
#pragma once
#include <memory>
#include <string>

#include "core/transport.h"

namespace icn::tcp {

Status createTransport(std::unique_ptr<Transport>* out, std::string* whyNot);

}  // namespace icn::tcp
