// libicn-shim.so: LD_PRELOAD interposer. Before the first communicator init of the process it points
// NCCL_TOPO_FILE (and NCCL_GRAPH_FILE when ICN_TOPO_GRAPH is set) at freshly generated files, then forwards
// to the real entry point found with dlsym(RTLD_NEXT). NCCL's public init functions are weak aliases of
// pncclCommInit*, so this interposes cleanly; NCCL reads NCCL_TOPO_FILE at every init, not once.
#include <dlfcn.h>

#include <cstdio>

#include "abi/export.h"
#include "shim/injector.h"

namespace {

struct UniqueId {  // ncclUniqueId: passed by value, 128 opaque bytes
  char internal[128];
};
static_assert(sizeof(UniqueId) == 128, "NCCL_UNIQUE_ID_BYTES");

using Result = int;               // ncclResult_t
constexpr Result kInternalError = 3;
using Comm = void*;               // ncclComm_t
using Config = void;              // ncclConfig_t, forwarded untouched

template <class F>
F next(const char* name) {
  F f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  if (!f) fprintf(stderr, "ICN WARN shim: %s not found after libicn-shim.so (is NCCL loaded?)\n", name);
  return f;
}

void prepare() { icn::shim::Injector::instance().applyToEnvironment(); }

}  // namespace

ICN_EXPORT Result ncclCommInitRank(Comm* comm, int nranks, UniqueId id, int rank) {
  prepare();
  static auto real = next<Result (*)(Comm*, int, UniqueId, int)>("ncclCommInitRank");
  return real ? real(comm, nranks, id, rank) : kInternalError;
}

ICN_EXPORT Result ncclCommInitRankConfig(Comm* comm, int nranks, UniqueId id, int rank,
                                         Config* config) {
  prepare();
  static auto real = next<Result (*)(Comm*, int, UniqueId, int, Config*)>("ncclCommInitRankConfig");
  return real ? real(comm, nranks, id, rank, config) : kInternalError;
}

ICN_EXPORT Result ncclCommInitAll(Comm* comm, int ndev, const int* devlist) {
  prepare();
  static auto real = next<Result (*)(Comm*, int, const int*)>("ncclCommInitAll");
  return real ? real(comm, ndev, devlist) : kInternalError;
}

ICN_EXPORT Result ncclCommInitRankScalable(Comm* comm, int nranks, int myrank, int nId,
                                           UniqueId* commIds, Config* config) {
  prepare();
  static auto real = next<Result (*)(Comm*, int, int, int, UniqueId*, Config*)>("ncclCommInitRankScalable");
  return real ? real(comm, nranks, myrank, nId, commIds, config) : kInternalError;
}
