// A stand-in "libnccl.so" for the shim tests: exports the four communicator-init entry points and records
// what NCCL would see at init: NCCL_TOPO_FILE / NCCL_GRAPH_FILE read the way NCCL reads them (through the
// env plugin named by NCCL_ENV_PLUGIN when set, else getenv), and the file's content. Like NCCL 2.30.7 it takes
// ncclEnvPlugin_v2 before ncclEnvPlugin_v1; FAKE_NCCL_ENV_API=1 plays an NCCL that only knows v1 (2.28.7-2.30.4).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "abi/env_v1.h"
#include "abi/env_v2.h"

namespace {

struct UniqueId {
  char internal[128];
};

std::mutex g_mu;
const char* (*g_getEnv)(const char*) = nullptr;
bool g_envTried = false;

void fakeLogger(ncclDebugLogLevel level, unsigned long flags, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  printf("FAKE log level=%d flags=0x%lx %s\n", static_cast<int>(level), flags, buf);
}

// NCCL's lookup: the name as given, then libnccl-env-<name>.so; symbol v2 first, then v1.
void loadEnvPlugin() {
  if (g_envTried) return;
  g_envTried = true;
  const char* name = getenv("NCCL_ENV_PLUGIN");
  if (!name) return;
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen((std::string("libnccl-env-") + name + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("FAKE envplugin-load-failed %s\n", dlerror());
    return;
  }
  const char* api = getenv("FAKE_NCCL_ENV_API");
  bool v1Only = api && !strcmp(api, "1");
  auto* v2 = v1Only ? nullptr : static_cast<ncclEnv_v2_t*>(dlsym(h, "ncclEnvPlugin_v2"));
  if (v2) {
    printf("FAKE envplugin api=v2\n");
    if (v2->init(2, 30, 7, "", fakeLogger) == ncclSuccess) g_getEnv = v2->getEnv;
    return;
  }
  auto* v1 = static_cast<ncclEnv_v1_t*>(dlsym(h, "ncclEnvPlugin_v1"));
  if (v1) {
    printf("FAKE envplugin api=v1\n");
    if (v1->init(2, 28, 9, "") == ncclSuccess) g_getEnv = v1->getEnv;
  }
}

const char* ncclGetEnv(const char* k) {
  loadEnvPlugin();
  return g_getEnv ? g_getEnv(k) : getenv(k);
}

std::string fileSummary(const char* path, const char* tag) {
  if (!path) return "none";
  std::ifstream f(path, std::ios::binary);
  if (!f) return "unreadable";
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  // Content goes to a side file the test can validate; the record carries its size and first line.
  if (const char* dir = getenv("FAKE_NCCL_DUMP"))
    std::ofstream(std::string(dir) + "/" + std::to_string(getpid()) + "-" + tag + ".xml", std::ios::binary) << s;
  return std::to_string(s.size()) + ":" + s.substr(0, s.find('\n'));
}

int record(const char* fn, int rank, int nranks, const UniqueId* id) {
  std::lock_guard<std::mutex> lk(g_mu);
  const char* topo = ncclGetEnv("NCCL_TOPO_FILE");
  const char* graph = ncclGetEnv("NCCL_GRAPH_FILE");
  const char* raw = getenv("NCCL_TOPO_FILE");
  const char* debug = ncclGetEnv("NCCL_DEBUG");
  printf("FAKE call=%s rank=%d nranks=%d id=%d pid=%d topo=%s rawenv=%s graph=%s debug=%s topofile=%s graphfile=%s\n",
         fn, rank, nranks, id ? static_cast<unsigned char>(id->internal[0]) | (static_cast<unsigned char>(id->internal[127]) << 8) : -1,
         getpid(), topo ? topo : "(null)", raw ? raw : "(null)", graph ? graph : "(null)", debug ? debug : "(null)",
         fileSummary(topo, "topo").c_str(), fileSummary(graph, "graph").c_str());
  fflush(stdout);
  return 0;
}

}  // namespace

extern "C" {
int ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank) {
  *comm = reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + rank));
  return record("InitRank", rank, nranks, &id);
}
int ncclCommInitRankConfig(void** comm, int nranks, UniqueId id, int rank, void* config) {
  *comm = reinterpret_cast<void*>(static_cast<uintptr_t>(0x2000 + rank));
  return record(config ? "InitRankConfig" : "InitRankConfig(null)", rank, nranks, &id);
}
int ncclCommInitAll(void** comm, int ndev, const int* devlist) {
  for (int i = 0; i < ndev; i++) comm[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(0x3000 + (devlist ? devlist[i] : i)));
  return record("InitAll", -1, ndev, nullptr);
}
int ncclCommInitRankScalable(void** comm, int nranks, int myrank, int nId, UniqueId* ids, void* config) {
  *comm = reinterpret_cast<void*>(static_cast<uintptr_t>(0x4000 + myrank));
  return record("InitRankScalable", myrank, nranks * 100 + nId, ids);
}
}
