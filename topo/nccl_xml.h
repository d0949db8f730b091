// NCCL_TOPO_FILE generation: the PCI levels NCCL itself would record (every second bridge, as NCCL's sysfs
// walk does), the GPUs and NICs below them, and the NVLinks NVML reports. Only facts we know are written;
// NCCL fills the rest (gpu dev/sm/nvlinks without NVML, net properties from the net plugin).
#pragma once
#include <string>

#include "core/status.h"
#include "topo/model.h"

namespace icn::topo {

constexpr size_t kNcclTopoMaxNodes = 256;  // NCCL_TOPO_XML_MAX_NODES

Status writeTopologyXml(const Machine& m, std::string& out, std::string& err);

// NCCL's pci "link_speed" string for a per-lane rate ("16.0 GT/s PCIe"); "" when unknown.
std::string ncclLinkSpeed(double gts);

}  // namespace icn::topo
