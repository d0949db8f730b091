// icn-numa-bw: host<->GPU copy bandwidth from pinned host memory placed on each NUMA node, to
// show what a wrong-node buffer (or a proxy thread on the wrong socket) costs each GPU.
// Host memory is mmap'ed, bound to one node with mbind(2), touched, then pinned with
// cudaHostRegister; the measuring thread runs on that node's CPUs.
#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "probe_cuda.h"

namespace {

constexpr int kMpolBind = 2;          // MPOL_BIND
constexpr unsigned kMpolMfStrict = 1;  // MPOL_MF_STRICT
constexpr unsigned kMpolMfMove = 2;    // MPOL_MF_MOVE
constexpr int kMpolFNode = 1, kMpolFAddr = 2;  // get_mempolicy flags

struct Node {
  int id = 0;
  std::vector<int> cpus;
};

std::string readLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::vector<Node> memoryNodes() {
  std::vector<Node> nodes;
  const std::string base = "/sys/devices/system/node/";
  DIR* d = opendir(base.c_str());
  if (d) {
    while (dirent* e = readdir(d)) {
      int id = -1;
      if (sscanf(e->d_name, "node%d", &id) != 1) continue;
      std::ifstream mi(base + e->d_name + "/meminfo");
      std::string line;
      long long kb = 0;
      while (std::getline(mi, line)) {
        size_t p = line.find("MemTotal:");
        if (p != std::string::npos) kb = atoll(line.c_str() + p + 9);
      }
      if (kb <= 0) continue;  // CPU-less/memory-less nodes (e.g. GPU memory exposed as a node) are skipped
      Node n;
      n.id = id;
      n.cpus = icnprobe::parseIntList(readLine(base + e->d_name + "/cpulist"));
      nodes.push_back(n);
    }
    closedir(d);
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) { return a.id < b.id; });
  if (nodes.empty()) nodes.push_back(Node{0, {}});  // no NUMA information: one anonymous node
  return nodes;
}

// Host buffer bound to one node and pinned. Unbinds and unmaps on destruction.
class NodeBuffer {
 public:
  NodeBuffer(size_t size, int node, bool bind) : size_(size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { error_ = std::string("mmap: ") + strerror(errno); return; }
    ptr_ = p;
    if (bind) {
      unsigned long mask[16] = {};
      if (node >= 0 && node < 1024) mask[node / 64] |= 1ul << (node % 64);
      if (syscall(SYS_mbind, ptr_, size_, kMpolBind, mask, 1024ul, kMpolMfStrict | kMpolMfMove) != 0)
        error_ = std::string("mbind: ") + strerror(errno);
    }
    memset(ptr_, 0x5a, size_);  // fault the pages in on the bound node
    placedNode_ = nodeOf(ptr_);
    cudaError_t e = cudaHostRegister(ptr_, size_, cudaHostRegisterPortable);
    if (e != cudaSuccess) error_ = std::string("cudaHostRegister: ") + cudaGetErrorString(e);
    else registered_ = true;
  }
  ~NodeBuffer() {
    if (registered_) cudaHostUnregister(ptr_);
    if (ptr_) munmap(ptr_, size_);
  }
  NodeBuffer(const NodeBuffer&) = delete;
  NodeBuffer& operator=(const NodeBuffer&) = delete;
  void* data() const { return ptr_; }
  bool usable() const { return registered_; }
  const std::string& error() const { return error_; }
  int placedNode() const { return placedNode_; }

 private:
  static int nodeOf(void* addr) {
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, nullptr, 0ul, addr, (unsigned long)(kMpolFNode | kMpolFAddr)) != 0) return -1;
    return node;
  }
  size_t size_;
  void* ptr_ = nullptr;
  bool registered_ = false;
  int placedNode_ = -1;
  std::string error_;
};

bool pinToCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

bool timeCopies(void* dst, const void* src, size_t size, int iters, cudaMemcpyKind kind, cudaStream_t s, double* gbps) {
  float ms = 0;
  if (!icnprobe::timeOnStream(s, iters, [&] { return cudaMemcpyAsync(dst, src, size, kind, s); }, &ms)) return false;
  *gbps = icnprobe::gbps(static_cast<double>(size), iters, ms);
  return true;
}

int gpuNumaNode(const std::string& busId) {
  std::string lower = busId;
  for (char& c : lower) c = (char)tolower((unsigned char)c);
  std::string s = readLine("/sys/bus/pci/devices/" + lower + "/numa_node");
  return s.empty() ? -1 : atoi(s.c_str());
}

struct Cell { double h2d = 0, d2h = 0; };

}  // namespace

int main(int argc, char** argv) {
  icnprobe::ProbeCli cli("icn-numa-bw", "pinned host memory on each NUMA node to/from each GPU (copy-engine bandwidth)",
                         "bytes per copy (K/M/G)", "10");
  cli.options().add("nodes", "", "NUMA nodes to test (default: every node with memory)");
  int rc = 0;
  if (!cli.parse(argc, argv, 1, &rc) || !icnprobe::resolveDevices(cli, &rc)) return rc;
  const size_t size = cli.size;
  const int iters = cli.iters;
  const std::vector<int>& devs = cli.devices;
  std::vector<Node> nodes = memoryNodes();
  std::vector<int> wanted = icnprobe::parseIntList(cli.options().str("nodes"));
  if (!wanted.empty()) {
    std::vector<Node> kept;
    for (const Node& n : nodes)
      if (std::find(wanted.begin(), wanted.end(), n.id) != wanted.end()) kept.push_back(n);
    nodes = kept;
    if (nodes.empty()) {
      fprintf(stderr, "icn-numa-bw: none of --nodes has memory\n");
      return 2;
    }
  }
  bool multiNode = nodes.size() > 1;

  std::vector<std::string> bus(devs.size());
  std::vector<int> gpuNode(devs.size());
  std::vector<void*> dbuf(devs.size(), nullptr);
  std::vector<cudaStream_t> streams(devs.size(), nullptr);
  auto setup = [&]() -> bool {
    for (size_t g = 0; g < devs.size(); g++) {
      char b[32] = {};
      ICN_CUDA_OK(cudaDeviceGetPCIBusId(b, sizeof(b), devs[g]));
      bus[g] = b;
      gpuNode[g] = gpuNumaNode(bus[g]);
      ICN_CUDA_OK(cudaSetDevice(devs[g]));
      ICN_CUDA_OK(cudaMalloc(&dbuf[g], size));
      ICN_CUDA_OK(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking));
    }
    return true;
  };
  if (!setup()) return 1;

  printf("# icn-numa-bw: %zu NUMA node(s) with memory, %zu GPU(s), %zu-byte copies x %d\n", nodes.size(), devs.size(), size, iters);
  for (size_t g = 0; g < devs.size(); g++) printf("GPU %d %s: NUMA node %d\n", devs[g], bus[g].c_str(), gpuNode[g]);

  std::vector<std::vector<Cell>> cells(nodes.size(), std::vector<Cell>(devs.size()));
  std::vector<std::string> nodeNotes(nodes.size());
  std::vector<int> placed(nodes.size(), -1);
  for (size_t k = 0; k < nodes.size(); k++) {
    bool pinned = pinToCpus(nodes[k].cpus);
    NodeBuffer host(size, nodes[k].id, multiNode);
    placed[k] = host.placedNode();
    if (!host.error().empty()) nodeNotes[k] = host.error();
    if (!pinned && !nodes[k].cpus.empty()) nodeNotes[k] += (nodeNotes[k].empty() ? "" : "; ") + std::string("could not pin the thread");
    if (!host.usable()) continue;
    for (size_t g = 0; g < devs.size(); g++) {
      if (cudaSetDevice(devs[g]) != cudaSuccess) return 1;
      if (!timeCopies(dbuf[g], host.data(), size, iters, cudaMemcpyHostToDevice, streams[g], &cells[k][g].h2d)) return 1;
      if (!timeCopies(host.data(), dbuf[g], size, iters, cudaMemcpyDeviceToHost, streams[g], &cells[k][g].d2h)) return 1;
    }
  }

  printf("\nHost->GPU / GPU->host bandwidth (GB/s); '*' marks the GPU's own node\n%-10s", "node");
  for (int d : devs) printf("   GPU %-2d h2d / d2h ", d);
  printf("\n");
  for (size_t k = 0; k < nodes.size(); k++) {
    printf("%-10d", nodes[k].id);
    for (size_t g = 0; g < devs.size(); g++)
      printf("  %c %7.1f / %7.1f  ", gpuNode[g] == nodes[k].id ? '*' : ' ', cells[k][g].h2d, cells[k][g].d2h);
    printf("%s%s\n", nodeNotes[k].empty() ? "" : "  note: ", nodeNotes[k].c_str());
  }

  // Penalty per GPU: its own node versus the worst other node.
  std::string gpusJson;
  printf("\nWrong-node penalty:\n");
  for (size_t g = 0; g < devs.size(); g++) {
    int local = -1;
    for (size_t k = 0; k < nodes.size(); k++) if (nodes[k].id == gpuNode[g]) local = (int)k;
    double worstH2d = 0, worstD2h = 0;
    bool haveRemote = false;
    for (size_t k = 0; k < nodes.size(); k++) {
      if ((int)k == local || cells[k][g].h2d <= 0) continue;
      if (!haveRemote || cells[k][g].h2d < worstH2d) worstH2d = cells[k][g].h2d;
      if (!haveRemote || cells[k][g].d2h < worstD2h) worstD2h = cells[k][g].d2h;
      haveRemote = true;
    }
    double penH2d = 0, penD2h = 0;
    if (local >= 0 && haveRemote && cells[local][g].h2d > 0) {
      penH2d = 100.0 * (1.0 - worstH2d / cells[local][g].h2d);
      penD2h = cells[local][g].d2h > 0 ? 100.0 * (1.0 - worstD2h / cells[local][g].d2h) : 0;
      printf("  GPU %d: local node %d h2d %.1f / d2h %.1f GB/s; remote node costs %.0f%% h2d, %.0f%% d2h\n", devs[g],
             gpuNode[g], cells[local][g].h2d, cells[local][g].d2h, penH2d, penD2h);
    } else {
      printf("  GPU %d: %s\n", devs[g], local < 0 ? "its NUMA node is unknown or untested" : "no other node with memory to compare");
    }
    icnprobe::appendJsonItem(gpusJson,
                             "{\"dev\":%d,\"pci\":\"%s\",\"numa_node\":%d,\"h2d_penalty_pct\":%.2f,\"d2h_penalty_pct\":%.2f}",
                             devs[g], bus[g].c_str(), gpuNode[g], penH2d, penD2h);
  }

  std::string cellsJson;
  for (size_t k = 0; k < nodes.size(); k++) {
    for (size_t g = 0; g < devs.size(); g++) {
      icnprobe::appendJsonItem(
          cellsJson,
          "{\"node\":%d,\"placed_node\":%d,\"dev\":%d,\"local\":%s,\"h2d_GBps\":%.3f,\"d2h_GBps\":%.3f,\"note\":\"%s\"}",
          nodes[k].id, placed[k], devs[g], gpuNode[g] == nodes[k].id ? "true" : "false", cells[k][g].h2d,
          cells[k][g].d2h, icnprobe::jsonEscape(nodeNotes[k]).c_str());
    }
  }
  if (!cli.writeReport(",\"gpus\":[" + gpusJson + "],\"cells\":[" + cellsJson + "]")) return 1;
  for (size_t g = 0; g < devs.size(); g++) {
    cudaSetDevice(devs[g]);
    cudaFree(dbuf[g]);
    cudaStreamDestroy(streams[g]);
  }
  return 0;
}
