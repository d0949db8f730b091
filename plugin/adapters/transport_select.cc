#include "adapters/transport_select.h"

#include "core/log.h"
#include "core/params.h"
#if ICN_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#if ICN_HAVE_TCP
#include "transport/tcp/tcp_transport.h"
#endif
#if ICN_HAVE_IB && __has_include("transport/ib/ib_transport.h")
#include "transport/ib/ib_transport.h"
#define ICN_IB_AVAILABLE 1
#endif

namespace icn::adapters {
namespace {

Status tryIb(std::unique_ptr<Transport>* out, std::string* why) {
#ifdef ICN_IB_AVAILABLE
  return ib::createTransport(out, why);
#else
  *why = "this build has no ibverbs transport";
  return Status::InvalidUsage;
#endif
}

Status tryUcx(std::unique_ptr<Transport>* out, std::string* why) {
#if ICN_HAVE_UCX
  return ucx::createTransport(out, why);
#else
  *why = "this build has no UCX transport";
  return Status::InvalidUsage;
#endif
}

Status tryTcp(std::unique_ptr<Transport>* out, std::string* why) {
#if ICN_HAVE_TCP
  return tcp::createTransport(out, why);
#else
  *why = "this build has no TCP transport";
  return Status::InvalidUsage;
#endif
}

// One line naming the transports this host can use and, for each it cannot, why (a missing system library
// is an ordinary host, not a fault): ib and ucx need libibverbs / UCX, which are opened at run time.
void logAvailability() {
  std::string yes, no;
  auto add = [](std::string* list, const std::string& item) { *list += (list->empty() ? "" : ", ") + item; };
#ifdef ICN_IB_AVAILABLE
  std::string ibWhy;
  if (ib::libraryAvailable(&ibWhy))
    add(&yes, "ib");
  else
    add(&no, "ib: " + ibWhy);
#else
  add(&no, "ib: not built");
#endif
#if ICN_HAVE_TCP
  add(&yes, "tcp");
#else
  add(&no, "tcp: not built");
#endif
#if ICN_HAVE_UCX
  std::string ucxWhy, ucxVersion;
  if (ucx::libraryAvailable(&ucxWhy, &ucxVersion))
    add(&yes, "ucx (UCX " + ucxVersion + ")");
  else
    add(&no, "ucx: " + ucxWhy);
#else
  add(&no, "ucx: not built");
#endif
  ICN_INFO(subsys::Net | subsys::Init, "transports available: %s%s%s", yes.empty() ? "none" : yes.c_str(),
           no.empty() ? "" : "; unavailable: ", no.c_str());
}

}  // namespace

Status selectTransport(std::unique_ptr<Transport>* out) {
  const std::string& choice = params::getString(params::Id::Transport);
  std::string why;
  logAvailability();
  if (choice == "ib") {
    if (tryIb(out, &why) == Status::Ok) {
      ICN_INFO(subsys::Net | subsys::Init, "transport ib (ICN_TRANSPORT=ib)");
      return Status::Ok;
    }
    ICN_WARN(subsys::Net | subsys::Init, "ICN_TRANSPORT=ib but the verbs transport is unusable: %s", why.c_str());
    return Status::SystemError;
  }
  if (choice == "ucx") {
    if (tryUcx(out, &why) == Status::Ok) {
      ICN_INFO(subsys::Net | subsys::Init, "transport ucx (ICN_TRANSPORT=ucx)");
      return Status::Ok;
    }
    ICN_WARN(subsys::Net | subsys::Init, "ICN_TRANSPORT=ucx but UCX is unusable: %s", why.c_str());
    return Status::SystemError;
  }
  if (choice == "tcp") {
    if (tryTcp(out, &why) == Status::Ok) {
      ICN_INFO(subsys::Net | subsys::Init, "transport tcp (ICN_TRANSPORT=tcp)");
      return Status::Ok;
    }
    ICN_WARN(subsys::Net | subsys::Init, "ICN_TRANSPORT=tcp but the TCP transport is unusable: %s", why.c_str());
    return Status::SystemError;
  }
  if (choice != "auto") {
    ICN_WARN(subsys::Net | subsys::Init, "ICN_TRANSPORT=%s is not one of auto|ib|ucx|tcp", choice.c_str());
    return Status::InvalidArgument;
  }
  if (tryIb(out, &why) == Status::Ok) {
    ICN_INFO(subsys::Net | subsys::Init, "transport ib (ICN_TRANSPORT=auto: an active RDMA port is usable)");
    return Status::Ok;
  }
  // Without a usable RDMA port, auto takes the fallbacks in this order (the first that can be created).
  // ICN's TCP transport first: across hosts it moves NCCL's traffic on several sockets with helper threads,
  // where UCX's TCP lanes leave every byte to NCCL's one proxy thread (docs/results/cross-host); UCX
  // (explicitly ICN_TRANSPORT=ucx) when the TCP transport cannot start.
  struct Fallback {
    const char* name;
    Status (*create)(std::unique_ptr<Transport>*, std::string*);
  };
  const Fallback fallbacks[] = {{"tcp", tryTcp}, {"ucx", tryUcx}};
  std::string whyNot = "ib: " + why;
  for (const Fallback& f : fallbacks) {
    std::string fwhy;
    if (f.create(out, &fwhy) == Status::Ok) {
      // Ethernet without RDMA is an ordinary cluster, not a fault: INFO, with the reason.
      ICN_INFO(subsys::Net | subsys::Init, "transport %s (ICN_TRANSPORT=auto: no usable RDMA port: %s)", f.name,
               why.c_str());
      return Status::Ok;
    }
    whyNot += std::string("; ") + f.name + ": " + fwhy;
  }
  ICN_WARN(subsys::Net | subsys::Init, "no transport is usable: %s", whyNot.c_str());
  return Status::SystemError;
}

}  // namespace icn::adapters
