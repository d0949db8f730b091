// Recorded facts (what NVML and ibverbs would say), so rules that need them run without the hardware.
// Format (all keys optional; <...> the value's kind):
// {"gpus":[{"busid":<PCI address>,"index":<int>,"sm":<int>,"name":<string>,"nvlink_capable":<int>,
//           "nvlink_active":<int>,"nvlinks":[{"target":<PCI address>,"tclass":<hex string>,"count":<int>}]}],
//  "rdma":[{"device":<string>,"port":<int>,"active_mtu":<int>,"state":<string>,"link_layer":<string>,
//           "netdev":<string>,"netdev_mtu":<int>,"rate":<Gbit/s>}]}
#include <cstdlib>

#include "core/json.h"
#include "topo/probe.h"

namespace icn::topo {

Status applyFacts(const std::string& path, Machine& m, std::string& err) {
  json::Value doc;
  if (!json::parseFile(path, doc, err)) return Status::InvalidArgument;
  if (!doc.isObject()) {
    err = path + ": top level is not an object";
    return Status::InvalidArgument;
  }
  if (const json::Value* gpus = doc.get("gpus"); gpus && gpus->isArray()) {
    for (const json::Value& f : gpus->arr) {
      std::string bus = normalizeBusId(f.string("busid"));
      Gpu* g = nullptr;
      for (Gpu& x : m.gpus)
        if (m.pci[x.pci].busid == bus) g = &x;
      if (!g) {
        err = path + ": GPU " + f.string("busid") + " is not in the PCI tree";
        return Status::InvalidArgument;
      }
      g->nvmlKnown = true;
      g->index = static_cast<int>(f.number("index", g->index));
      g->sm = static_cast<int>(f.number("sm", g->sm));
      g->name = f.string("name", g->name);
      g->nvlinkCapable = static_cast<int>(f.number("nvlink_capable", 0));
      g->nvlinkActive = static_cast<int>(f.number("nvlink_active", 0));
      g->nvlinks.clear();
      if (const json::Value* ls = f.get("nvlinks"); ls && ls->isArray()) {
        for (const json::Value& l : ls->arr) {
          NvLink nl;
          nl.target = normalizeBusId(l.string("target"));
          nl.tclass = static_cast<uint32_t>(strtoul(l.string("tclass", "0x068000").c_str(), nullptr, 0));
          nl.count = static_cast<int>(l.number("count", 1));
          if (nl.target.empty() || nl.count <= 0) {
            err = path + ": bad nvlink entry for GPU " + bus;
            return Status::InvalidArgument;
          }
          g->nvlinks.push_back(nl);
        }
      }
    }
  }
  if (const json::Value* rdma = doc.get("rdma"); rdma && rdma->isArray()) {
    for (const json::Value& f : rdma->arr) {
      std::string dev = f.string("device");
      Nic* nic = nullptr;
      for (Nic& x : m.nics)
        if (x.name == dev) nic = &x;
      if (!nic) {
        err = path + ": RDMA device " + dev + " is not in the topology";
        return Status::InvalidArgument;
      }
      int portNo = static_cast<int>(f.number("port", 1));
      RdmaPort* port = nullptr;
      for (RdmaPort& p : nic->ports)
        if (p.port == portNo) port = &p;
      if (!port) {
        nic->ports.push_back(RdmaPort{});
        port = &nic->ports.back();
        port->port = portNo;
      }
      port->activeMtu = static_cast<int>(f.number("active_mtu", port->activeMtu));
      port->state = f.string("state", port->state);
      port->linkLayer = f.string("link_layer", port->linkLayer);
      port->netdev = f.string("netdev", port->netdev);
      port->netdevMtu = static_cast<int>(f.number("netdev_mtu", port->netdevMtu));
      port->rateGbps = f.number("rate", port->rateGbps);
    }
  }
  m.sources.push_back("facts " + path);
  return Status::Ok;
}

}  // namespace icn::topo
