// The UCX transport: used when no RDMA port is usable (or ICN_TRANSPORT=ucx). One device: the
// interface the out-of-band handshake uses; UCX picks its own lanes (shm, tcp, rc...) underneath.
#pragma once
#include <memory>
#include <string>

#include "core/transport.h"

namespace icn::ucx {

Status createTransport(std::unique_ptr<Transport>* out, std::string* whyNot);

// Whether UCX's libraries load with every function the transport calls (*why says why not); *version is
// UCX's release ("1.13.1"). Creates no UCX context.
bool libraryAvailable(std::string* why, std::string* version);

}  // namespace icn::ucx
