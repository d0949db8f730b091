// The ibverbs RC transport (InfiniBand and RoCE). createTransport fails with a human reason ("no RDMA device",
// "no active port", "verbs init failed: ...", "libibverbs.so.1 not found") when unusable; the adapter then
// falls back to the TCP transport.
#pragma once
#include <memory>
#include <string>

#include "core/transport.h"

namespace icn::ib {

Status createTransport(std::unique_ptr<Transport>* out, std::string* whyNot);

// Whether libibverbs loads with every function the transport calls (*why says why not). Opens no device.
bool libraryAvailable(std::string* why);

// As createTransport, with the sysfs tree read under `sysRoot` ("" = the real /sys). Tests only.
Status createTransportWithRoot(const std::string& sysRoot, std::unique_ptr<Transport>* out, std::string* whyNot);

}  // namespace icn::ib
