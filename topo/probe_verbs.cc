// ibverbs, loaded at run time: the active MTU of each RDMA port (sysfs does not expose it).
#include <dlfcn.h>

#include <cstring>
#include <memory>

#include "topo/probe.h"

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define ICN_TOPO_HAVE_VERBS_H 1
#endif

namespace icn::topo {

bool enrichFromVerbs(Machine& m, std::string& why) {
#ifndef ICN_TOPO_HAVE_VERBS_H
  why = "built without ibverbs headers";
  return false;
#else
  bool any = false;
  for (const Nic& n : m.nics) any |= n.rdma;
  if (!any) {
    why = "no RDMA device";
    return false;
  }
  struct Closer {
    void operator()(void* h) const { dlclose(h); }
  };
  std::unique_ptr<void, Closer> lib(dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    why = "libibverbs.so.1 not found";
    return false;
  }
  auto getList = reinterpret_cast<ibv_device** (*)(int*)>(dlsym(lib.get(), "ibv_get_device_list"));
  auto freeList = reinterpret_cast<void (*)(ibv_device**)>(dlsym(lib.get(), "ibv_free_device_list"));
  auto devName = reinterpret_cast<const char* (*)(ibv_device*)>(dlsym(lib.get(), "ibv_get_device_name"));
  auto open = reinterpret_cast<ibv_context* (*)(ibv_device*)>(dlsym(lib.get(), "ibv_open_device"));
  auto close = reinterpret_cast<int (*)(ibv_context*)>(dlsym(lib.get(), "ibv_close_device"));
  auto query = reinterpret_cast<int (*)(ibv_context*, uint8_t, ibv_port_attr*)>(dlsym(lib.get(), "ibv_query_port"));
  if (!getList || !freeList || !devName || !open || !close || !query) {
    why = "libibverbs.so.1 lacks an expected symbol";
    return false;
  }
  int n = 0;
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> list(getList(&n), freeList);
  if (!list) {
    why = "ibv_get_device_list failed";
    return false;
  }
  for (int i = 0; i < n; i++) {
    std::string name = devName(list.get()[i]);
    for (Nic& nic : m.nics) {
      if (!nic.rdma || nic.name != name) continue;
      ibv_context* ctx = open(list.get()[i]);
      if (!ctx) continue;
      for (RdmaPort& p : nic.ports) {
        ibv_port_attr attr;
        memset(&attr, 0, sizeof attr);
        if (query(ctx, static_cast<uint8_t>(p.port), &attr) == 0 && attr.active_mtu >= 1 && attr.active_mtu <= 5)
          p.activeMtu = 128 << attr.active_mtu;  // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5
      }
      close(ctx);
    }
  }
  m.sources.push_back("ibverbs");
  return true;
#endif
}

}  // namespace icn::topo
