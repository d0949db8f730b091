// Builds a Machine from the live system or from recorded inputs.
//   live:      hwloc discovery + sysfs under "/" + NVML (dlopen) + ibverbs (dlopen) + this process's env
//   recorded:  hwloc XML + optional sysfs tree under a root prefix + optional facts JSON + explicit env
#pragma once
#include <map>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/sysfs.h"
#include "topo/model.h"

namespace icn::topo {

struct ProbeOptions {
  std::string hwlocXml;  // empty = live hwloc discovery (HWLOC_XMLFILE, if set, is honoured by hwloc itself)
  // Root of the /sys and /proc tree to read. Empty = "/" for a live probe, none (no sysfs reads) for an XML.
  std::optional<std::string> sysRoot;
  std::string factsFile;  // recorded NVML / verbs facts (JSON); see docs/readme/topo.md
  bool useNvml = true;    // only for a live probe of this system
  bool useVerbs = true;
  std::string statusPid = "self";  // /proc/<pid>/status of the process whose binding doctor checks
  std::optional<std::map<std::string, std::string>> env;  // empty = this process's environment
};

Status probe(const ProbeOptions& opt, Machine& out, std::string& err);

// Pieces (exposed for tests and for the shim's cheaper path).
Status loadHwloc(const std::string& xmlPath, Machine& m, bool& thisSystem, std::string& err);
void enrichFromSysfs(const SysRoot& sys, const std::string& statusPid, Machine& m);  // PCI + host
void enrichNicsFromSysfs(const SysRoot& sys, Machine& m);  // after classifyDevices
bool enrichFromNvml(Machine& m, std::string& why);   // false when NVML is absent/unusable (why says so)
bool enrichFromVerbs(Machine& m, std::string& why);  // active MTU per RDMA port
Status applyFacts(const std::string& path, Machine& m, std::string& err);
void classifyDevices(Machine& m);  // GPUs and NICs from the PCI list + OS device names
std::map<std::string, std::string> captureEnv();
// "16.0 GT/s PCIe" / "8 GT/s" / "Unknown" -> GT/s (0 when unknown).
double parseLinkSpeed(const std::string& s);

}  // namespace icn::topo
