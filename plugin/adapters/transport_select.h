// ICN_TRANSPORT=auto|ib|ucx: which transport this process uses, and why (logged).
#pragma once
#include <memory>
#include <string>

#include "core/transport.h"

namespace icn::adapter {

Status selectTransport(std::unique_ptr<Transport>* out);

}  // namespace icn::adapter
