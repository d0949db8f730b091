// `icn-topo show`: the machine as a GPU/NIC/CPU matrix (nvidia-smi topo -m style) plus per-device details.
#pragma once
#include <string>

#include "topo/model.h"

namespace icn::topo {

std::string showText(const Machine& m);
std::string showJson(const Machine& m);
// "16.0 GT/s x16" style; "?" parts when unknown.
std::string describeLink(const PciLink& l, bool current);

}  // namespace icn::topo
