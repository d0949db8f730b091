// libibverbs, loaded at run time: the functions the transport calls, resolved once per process.
// The data path (ibv_post_send, ibv_post_recv, ibv_poll_cq) is inline in verbs.h and calls the provider
// through the context's ops table, so it needs no symbol from here.
#pragma once
#include <infiniband/verbs.h>

#include <string>

namespace icn::ib {

struct VerbsApi {
  ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(ibv_device**);
  const char* (*get_device_name)(ibv_device*);
  ibv_context* (*open_device)(ibv_device*);
  int (*close_device)(ibv_context*);
  int (*query_device)(ibv_context*, ibv_device_attr*);
  int (*query_port_compat)(ibv_context*, uint8_t, ibv_port_attr*);  // providers without query_port in ops
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*);
  ibv_pd* (*alloc_pd)(ibv_context*);
  int (*dealloc_pd)(ibv_pd*);
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*reg_mr_iova2)(ibv_pd*, void*, size_t, uint64_t, unsigned int);
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);  // null: libibverbs older than 34
  int (*dereg_mr)(ibv_mr*);
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroy_cq)(ibv_cq*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int);
  int (*destroy_qp)(ibv_qp*);
  int (*get_async_event)(ibv_context*, ibv_async_event*);
  void (*ack_async_event)(ibv_async_event*);
  const char* (*event_type_str)(ibv_event_type);
  const char* (*wc_status_str)(ibv_wc_status);
};

// Loads libibverbs.so.1 on the first call; null with *why ("libibverbs.so.1 not found", "... lacks
// ibv_reg_mr@IBVERBS_1.1") when it cannot. Thread-safe; the answer never changes within a process.
const VerbsApi* loadVerbs(std::string* why);

// The loaded table; only after loadVerbs succeeded (every verbs object in the transport was made through it).
const VerbsApi& verbs();

// verbs.h's ibv_reg_mr and ibv_query_port are inline wrappers choosing between entry points; these make the
// same choice through the table.
ibv_mr* verbsRegMr(ibv_pd* pd, void* addr, size_t length, unsigned int access);
ibv_mr* verbsRegDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
int verbsQueryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr);

}  // namespace icn::ib
