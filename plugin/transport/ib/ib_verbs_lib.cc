#include "transport/ib/ib_verbs_lib.h"

#include <cerrno>
#include <cstring>

#include "transport/dynlib.h"
#include "transport/ib/ib_transport.h"

namespace icn::ib {
namespace {

struct Loaded {
  dynlib::Library lib;
  VerbsApi api{};
};

// The symbol versions the headers were written against (rdma-core's stable ABI).
bool resolveAll(const dynlib::Library& l, VerbsApi* a, std::string* why) {
  constexpr const char* v11 = "IBVERBS_1.1";
  bool ok = l.resolve(&a->get_device_list, "ibv_get_device_list", v11, why) &&
            l.resolve(&a->free_device_list, "ibv_free_device_list", v11, why) &&
            l.resolve(&a->get_device_name, "ibv_get_device_name", v11, why) &&
            l.resolve(&a->open_device, "ibv_open_device", v11, why) &&
            l.resolve(&a->close_device, "ibv_close_device", v11, why) &&
            l.resolve(&a->query_device, "ibv_query_device", v11, why) &&
            l.resolve(&a->query_port_compat, "ibv_query_port", v11, why) &&
            l.resolve(&a->query_gid, "ibv_query_gid", v11, why) &&
            l.resolve(&a->alloc_pd, "ibv_alloc_pd", v11, why) &&
            l.resolve(&a->dealloc_pd, "ibv_dealloc_pd", v11, why) &&
            l.resolve(&a->reg_mr, "ibv_reg_mr", v11, why) &&
            l.resolve(&a->reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8", why) &&
            l.resolve(&a->dereg_mr, "ibv_dereg_mr", v11, why) &&
            l.resolve(&a->create_cq, "ibv_create_cq", v11, why) &&
            l.resolve(&a->destroy_cq, "ibv_destroy_cq", v11, why) &&
            l.resolve(&a->create_qp, "ibv_create_qp", v11, why) &&
            l.resolve(&a->modify_qp, "ibv_modify_qp", v11, why) &&
            l.resolve(&a->destroy_qp, "ibv_destroy_qp", v11, why) &&
            l.resolve(&a->get_async_event, "ibv_get_async_event", v11, why) &&
            l.resolve(&a->ack_async_event, "ibv_ack_async_event", v11, why) &&
            l.resolve(&a->event_type_str, "ibv_event_type_str", v11, why) &&
            l.resolve(&a->wc_status_str, "ibv_wc_status_str", v11, why);
  if (!ok) return false;
  // dma-buf registration is optional: without it GPU memory takes the nvidia_peermem path (or none).
  std::string ignored;
  (void)l.resolve(&a->reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", &ignored);
  return true;
}

dynlib::Resident<Loaded> g_verbs;  // contexts, QPs and MRs may outlive any comm

}  // namespace

const VerbsApi* loadVerbs(std::string* why) {
  const Loaded* l = g_verbs.get(
      [](Loaded* t, std::string* err) {
        return t->lib.open("libibverbs.so.1", err) && resolveAll(t->lib, &t->api, err);
      },
      why);
  return l ? &l->api : nullptr;
}

bool libraryAvailable(std::string* why) { return loadVerbs(why) != nullptr; }

const VerbsApi& verbs() { return g_verbs->api; }

ibv_mr* verbsRegMr(ibv_pd* pd, void* addr, size_t length, unsigned int access) {
  // The original entry point rejects the optional access bits (relaxed ordering); iova2 accepts them.
  if ((access & IBV_ACCESS_OPTIONAL_RANGE) == 0) return verbs().reg_mr(pd, addr, length, int(access));
  return verbs().reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), access);
}

ibv_mr* verbsRegDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  if (!verbs().reg_dmabuf_mr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return verbs().reg_dmabuf_mr(pd, offset, length, iova, fd, access);
}

int verbsQueryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  // Providers with the extended context answer for the full attribute struct; older ones fill the
  // original (shorter) layout through the exported function.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  return verbs().query_port_compat(ctx, port, attr);
}

}  // namespace icn::ib
