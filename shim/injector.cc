#include "shim/injector.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "topo/graph.h"
#include "topo/nccl_xml.h"
#include "topo/probe.h"

namespace icn::shim {
namespace {

constexpr unsigned long kLog = subsys::Init | subsys::Env;

bool writeAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// A memfd (readable by path through /proc/self/fd) or, where memfd is unavailable, a private 0600 temp file.
bool publish(const char* name, const std::string& data, int& fd, std::string& path, std::string& tempFile) {
  fd = memfd_create(name, MFD_CLOEXEC);
  if (fd >= 0) {
    if (!writeAll(fd, data)) {
      close(fd);
      fd = -1;
      return false;
    }
    path = "/proc/self/fd/" + std::to_string(fd);
    return true;
  }
  const char* dir = getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/icn-topo-" + std::to_string(getpid()) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  fd = mkstemp(buf.data());  // created 0600
  if (fd < 0) return false;
  tempFile = buf.data();
  if (!writeAll(fd, data)) {
    close(fd);
    fd = -1;
    unlink(tempFile.c_str());
    tempFile.clear();
    return false;
  }
  path = tempFile;
  return true;
}

std::string slurp(const std::string& path, size_t maxBytes) {
  std::ifstream f(path, std::ios::binary);
  std::string s(maxBytes, '\0');
  f.read(s.data(), static_cast<std::streamsize>(maxBytes));
  s.resize(f ? maxBytes : static_cast<size_t>(f.gcount()));
  return s;
}

}  // namespace

Injector& Injector::instance() {
  static Injector inj;
  return inj;
}

Injector::~Injector() {
  for (int fd : {topoFd_, graphFd_})
    if (fd >= 0) close(fd);
  for (const std::string& f : tempFiles_)
    if (!f.empty()) unlink(f.c_str());
}

bool Injector::userSetting(const char* value) {
  if (!value || !*value) return false;
  std::string v = value;
  if (v.rfind("/proc/self/fd/", 0) == 0) {
    // Ours only lives in the process that created it; after exec the number is stale or someone else's.
    char target[PATH_MAX];
    ssize_t n = readlink(value, target, sizeof target - 1);
    if (n < 0) return false;
    return true;  // a live fd of this process: ours (already injected) or a deliberate user choice
  }
  std::string mine = "/icn-topo-" + std::to_string(getpid()) + "-";
  size_t p = v.find("/icn-topo-");
  if (p != std::string::npos && v.find(mine) == std::string::npos) return false;  // a parent's temp file
  return true;
}

void Injector::generate() {
  if (params::getBool(params::Id::ShimDisable)) {
    ICN_INFO(kLog, "shim: ICN_SHIM_DISABLE set, injecting nothing");
    return;
  }
  const char* userTopo = getenv("NCCL_TOPO_FILE");
  const char* userGraph = getenv("NCCL_GRAPH_FILE");
  const std::string& graphSpec = params::getString(params::Id::TopoGraph);
  bool wantTopo = !userSetting(userTopo);
  bool wantGraph = !graphSpec.empty() && !userSetting(userGraph);
  if (!wantTopo) ICN_INFO(kLog, "shim: respecting NCCL_TOPO_FILE=%s set by the user", userTopo);
  if (!graphSpec.empty() && !wantGraph)
    ICN_INFO(kLog, "shim: respecting NCCL_GRAPH_FILE=%s set by the user", userGraph);
  if (!wantTopo && !wantGraph) return;

  topo::Machine m;
  std::string err;
  topo::ProbeOptions po;
  po.env = std::map<std::string, std::string>{};  // the environment plays no part in the files
  if (!ok(topo::probe(po, m, err))) {
    ICN_WARN(kLog, "shim: topology probe failed (%s); NCCL will detect the topology itself", err.c_str());
    return;
  }
  if (wantTopo) {
    std::string xml;
    if (!ok(topo::writeTopologyXml(m, xml, err))) {
      ICN_WARN(kLog, "shim: cannot describe this machine for NCCL (%s); not injecting", err.c_str());
    } else if (!publish("icn-topo.xml", xml, topoFd_, topoPath_, tempFiles_[0])) {
      ICN_WARN(kLog, "shim: cannot create the topology file: %s", strerror(errno));
    } else {
      ICN_INFO(kLog, "shim: generated NCCL_TOPO_FILE %s (%zu bytes, %zu GPUs, %zu NICs)", topoPath_.c_str(),
               xml.size(), m.gpus.size(), m.nics.size());
    }
  }
  if (wantGraph) {
    // ICN_TOPO_GRAPH is either a graph XML (used as is) or heatmap JSON files (comma-separated) to order from.
    std::string head = slurp(graphSpec.substr(0, graphSpec.find(',')), 64);
    size_t first = head.find_first_not_of(" \n\r\t");
    if (first == std::string::npos) {
      ICN_WARN(kLog, "shim: ICN_TOPO_GRAPH=%s is missing or empty; not injecting a graph", graphSpec.c_str());
    } else if (head[first] != '{') {
      graphPath_ = graphSpec;
      ICN_INFO(kLog, "shim: NCCL_GRAPH_FILE=%s (from ICN_TOPO_GRAPH)", graphPath_.c_str());
    } else {
      std::vector<std::string> files;
      std::stringstream ss(graphSpec);
      for (std::string f; std::getline(ss, f, ',');)
        if (!f.empty()) files.push_back(f);
      std::map<std::string, topo::CommTraffic> comms;
      const topo::CommTraffic* busiest = nullptr;
      std::string xml;
      if (ok(topo::loadHeatmaps(files, comms, err))) {
        for (const auto& [id, c] : comms)
          if (!busiest || c.total() > busiest->total()) busiest = &c;
      }
      if (!busiest) {
        ICN_WARN(kLog, "shim: no usable heatmap in ICN_TOPO_GRAPH (%s); not injecting a graph", err.c_str());
      } else if (!ok(topo::writeGraphXml(*busiest, topo::ringOrder(*busiest), m, {}, xml, err)) ||
                 !publish("icn-graph.xml", xml, graphFd_, graphPath_, tempFiles_[1])) {
        ICN_WARN(kLog, "shim: cannot write the graph file (%s); not injecting a graph", err.c_str());
        graphPath_.clear();
      } else {
        ICN_INFO(kLog, "shim: generated NCCL_GRAPH_FILE %s for comm %s (%d ranks)", graphPath_.c_str(),
                 busiest->commId.c_str(), busiest->nranks);
      }
    }
  }
}

const char* Injector::topoPath() {
  std::call_once(once_, [this] { generate(); });
  return topoPath_.empty() ? nullptr : topoPath_.c_str();
}

const char* Injector::graphPath() {
  std::call_once(once_, [this] { generate(); });
  return graphPath_.empty() ? nullptr : graphPath_.c_str();
}

void Injector::applyToEnvironment() {
  std::call_once(envOnce_, [this] {
    // setenv is not safe against concurrent getenv elsewhere; this runs once, before the first NCCL init
    // returns, while every other interposed init waits on the same once_flag.
    if (const char* t = topoPath()) setenv("NCCL_TOPO_FILE", t, 1);
    if (const char* g = graphPath()) setenv("NCCL_GRAPH_FILE", g, 1);
  });
}

}  // namespace icn::shim
