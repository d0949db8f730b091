#include "tuner/store/cache_key.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "core/params.h"
#include "core/private_file.h"
#include "core/sysfs.h"

extern char** environ;

namespace icn::tuner {
namespace {

// NCCL's version as the library in this process reports it; 0 when it cannot be found (NCCL linked statically
// without exporting ncclGetVersion). A library opened with RTLD_LOCAL (PyTorch loads NCCL that way) is not in the
// global scope, so the loaded libnccl is also looked up by its soname, without loading anything new.
int ncclVersion() {
  using Fn = int (*)(int*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
  void* loaded = nullptr;
  if (!fn && (loaded = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD)) != nullptr)
    fn = reinterpret_cast<Fn>(dlsym(loaded, "ncclGetVersion"));
  int v = 0;
  const bool ok = fn && fn(&v) == 0;
  if (loaded) dlclose(loaded);  // drops only the reference RTLD_NOLOAD took
  return ok ? v : 0;
}

// PCI functions of one class prefix ("0x03": display, "0x02": network, "0x0207": InfiniBand): vendor:device
// pairs, sorted, so the list does not depend on enumeration order.
std::string pciDevices(std::string_view classPrefix) {
  const SysRoot sys;
  const std::string root = "/sys/bus/pci/devices/";
  std::vector<std::string> out;
  for (const std::string& dev : sys.list(root)) {
    std::string cls = sys.line(root + dev + "/class").value_or("");
    if (cls.compare(0, classPrefix.size(), classPrefix) != 0) continue;
    out.push_back(sys.line(root + dev + "/vendor").value_or("") + ":" + sys.line(root + dev + "/device").value_or(""));
  }
  std::sort(out.begin(), out.end());
  std::string s;
  for (const std::string& x : out) s += x + ",";
  return s;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 || line.rfind("CPU part", 0) == 0) return line;
  return "";
}

// NCCL_* settings shape the topology and the transports (NCCL_P2P_DISABLE, NCCL_IB_HCA, NCCL_NVLS_ENABLE ...);
// logging, per-host identity and plugin selection do not change which choice is fastest.
std::string ncclSettings() {
  static const char* kIgnored[] = {"NCCL_DEBUG", "NCCL_HOSTID", "NCCL_COMM_ID", "NCCL_TUNER_PLUGIN",
                                   "NCCL_PROFILER_PLUGIN", "NCCL_TUNER_CONFIG_FILE", "NCCL_NET_PLUGIN"};
  std::vector<std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("NCCL_", 0) != 0) continue;
    std::string_view name = kv.substr(0, kv.find('='));
    bool skip = false;
    for (const char* ig : kIgnored) skip = skip || name.rfind(ig, 0) == 0;
    if (!skip) vars.emplace_back(kv);
  }
  std::sort(vars.begin(), vars.end());
  std::string s;
  for (const std::string& v : vars) s += v + ";";
  return s;
}

}  // namespace

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string cacheKey(int nRanks, int nNodes, const ShapeHints& hints) {
  std::string machine = "gpu=" + pciDevices("0x03") + " nic=" + pciDevices("0x02") + " " + cpuModel();
  std::string env = ncclSettings();
  char buf[512];
  int perNode = nNodes > 0 && nRanks % nNodes == 0 ? nRanks / nNodes : -1;  // -1: uneven
  snprintf(buf, sizeof buf,
           "icn-tuner-key v1 nccl=%d nRanks=%d nNodes=%d perNode=%d nvl=%d:%d:%d consts=%016llx "
           "machine=%016llx transport=%s nccl_env=%016llx",
           ncclVersion(), nRanks, nNodes, perNode, hints.nvlDomains, hints.minRanksPerNvlDomain,
           hints.maxRanksPerNvlDomain, static_cast<unsigned long long>(hints.constantsHash),
           static_cast<unsigned long long>(fnv1a(machine.data(), machine.size())),
           params::getString(params::Id::Transport).c_str(),
           static_cast<unsigned long long>(fnv1a(env.data(), env.size())));
  return buf;
}

Status defaultCachePath(const std::string& key, std::string* path, std::string* why) {
  std::string dir;
  if (Status s = privfile::cacheDir(&dir, why); s != Status::Ok) return s;
  char name[40];
  snprintf(name, sizeof name, "/tuner-%016llx.csv", static_cast<unsigned long long>(fnv1a(key.data(), key.size())));
  *path = dir + name;
  return Status::Ok;
}

}  // namespace icn::tuner
