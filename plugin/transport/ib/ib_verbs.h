// RAII owners for verbs objects, so every error path releases what it created.
#pragma once
#include <infiniband/verbs.h>

#include <cstring>
#include <memory>
#include <string>

#include "transport/ib/ib_verbs_lib.h"

namespace icn::ib {

struct ContextDeleter { void operator()(ibv_context* c) const { if (c) verbs().close_device(c); } };
struct PdDeleter { void operator()(ibv_pd* p) const { if (p) verbs().dealloc_pd(p); } };
struct CqDeleter { void operator()(ibv_cq* c) const { if (c) verbs().destroy_cq(c); } };
struct QpDeleter { void operator()(ibv_qp* q) const { if (q) verbs().destroy_qp(q); } };
struct MrDeleter { void operator()(ibv_mr* m) const { if (m) verbs().dereg_mr(m); } };
struct DevListDeleter { void operator()(ibv_device** l) const { if (l) verbs().free_device_list(l); } };
struct FreeDeleter { void operator()(void* p) const { free(p); } };

using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using DevListPtr = std::unique_ptr<ibv_device*, DevListDeleter>;

// Page-aligned host memory for FIFOs and staging buffers (registered, written by the NIC).
template <typename T>
using AlignedPtr = std::unique_ptr<T, FreeDeleter>;
template <typename T>
AlignedPtr<T> allocAligned(size_t count) {
  size_t bytes = (sizeof(T) * count + 4095) & ~size_t(4095);
  void* p = aligned_alloc(4096, bytes);
  if (p) memset(p, 0, bytes);
  return AlignedPtr<T>(static_cast<T*>(p));
}

inline std::string errnoString(int e) { return std::string(strerror(e)) + " (errno " + std::to_string(e) + ")"; }

}  // namespace icn::ib
