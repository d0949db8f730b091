// ICN_TRANSPORT=auto|ib|ucx: which transport this process uses, and why (logged).
#pragma once
#include <memory>
#include <string>

#include "core/transport.h"

namespace icn::adapters {

Status selectTransport(std::unique_ptr<Transport>* out);

}  // namespace icn::adapters
