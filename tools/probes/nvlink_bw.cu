// icn-nvlink-bw: GPU-pair copy bandwidth and latency matrix, compared with what NVML says the
// NVLink links should carry (active links x per-link rate). Measures, for every ordered pair:
//   - copy-engine bandwidth (cudaMemcpyPeerAsync), one direction and both directions at once;
//   - SM bandwidth: a kernel on the source GPU writing into the peer's memory;
//   - latency: an 8-byte peer memcpy, and a one-way SM ping-pong through peer memory flags.
#include <chrono>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "nvml_dl.h"
#include "probe_cuda.h"

using icnprobe::NvlinkInfo;

namespace {

struct Gpu {
  int dev = 0;
  std::string name, busId;
  NvlinkInfo nvl;
};

struct PairResult {
  bool peer = false;  // cudaDeviceCanAccessPeer
  double ceUni = 0, ceBidir = 0, smWrite = 0;  // GB/s
  double ceLatUs = 0, pingOneWayUs = 0;
  std::string note;
};

// Copies 16-byte vectors; the grid-stride loop keeps every SM busy whatever the size.
__global__ void copyKernel(int4* __restrict__ dst, const int4* __restrict__ src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

__device__ inline unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One side of the ping-pong. The initiator writes k into the peer's flag and waits for the
// echo in its own flag; the responder waits for k and echoes it. Both give up after ~2 s so a
// pair that cannot run concurrently reports an error instead of hanging.
__global__ void pingPong(volatile int* mine, volatile int* theirs, int rounds, bool initiator,
                         unsigned long long* elapsedNs, int* failed) {
  const unsigned long long limitNs = 2000000000ull;
  unsigned long long t0 = globalTimerNs();
  for (int k = 1; k <= rounds; k++) {
    if (initiator) {
      *theirs = k;
      __threadfence_system();
    }
    while (*mine != k) {
      if (globalTimerNs() - t0 > limitNs) { *failed = 1; return; }
    }
    if (!initiator) {
      *theirs = k;
      __threadfence_system();
    }
  }
  if (initiator) *elapsedNs = globalTimerNs() - t0;
}

struct Buffers {
  std::vector<void*> big;  // one per GPU, 'size' bytes
  std::vector<void*> big2;  // second buffer per GPU (destination of the reverse direction)
  std::vector<int*> flag;
  std::vector<cudaStream_t> stream;
};

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool measureCe(const Buffers& b, int src, int dst, size_t size, int iters, double* gbps) {
  ICN_CUDA_OK(cudaSetDevice(src));
  float ms = 0;
  auto copy = [&] { return cudaMemcpyPeerAsync(b.big2[dst], dst, b.big[src], src, size, b.stream[src]); };
  if (!icnprobe::timeOnStream(b.stream[src], iters, copy, &ms)) return false;
  *gbps = icnprobe::gbps(static_cast<double>(size), iters, ms);
  return true;
}

bool measureBidir(const Buffers& b, int x, int y, size_t size, int iters, double* gbps) {
  for (int d : {x, y}) {
    ICN_CUDA_OK(cudaSetDevice(d));
    ICN_CUDA_OK(cudaDeviceSynchronize());
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; i++) {
    ICN_CUDA_OK(cudaMemcpyPeerAsync(b.big2[y], y, b.big[x], x, size, b.stream[x]));
    ICN_CUDA_OK(cudaMemcpyPeerAsync(b.big2[x], x, b.big[y], y, size, b.stream[y]));
  }
  for (int d : {x, y}) ICN_CUDA_OK(cudaStreamSynchronize(b.stream[d]));
  double s = seconds(t0, std::chrono::steady_clock::now());
  *gbps = s > 0 ? 2.0 * size * iters / (s * 1e9) : 0;
  return true;
}

bool measureSm(const Buffers& b, int src, int dst, size_t size, int iters, double* gbps) {
  size_t n = size / sizeof(int4);
  int sms = 0;
  ICN_CUDA_OK(cudaSetDevice(src));
  ICN_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, src));
  int blocks = sms * 4, threads = 512;
  auto launch = [&] {
    copyKernel<<<blocks, threads, 0, b.stream[src]>>>((int4*)b.big2[dst], (const int4*)b.big[src], n);
    return cudaGetLastError();
  };
  float ms = 0;
  if (!icnprobe::timeOnStream(b.stream[src], iters, launch, &ms)) return false;
  *gbps = icnprobe::gbps(static_cast<double>(n * sizeof(int4)), iters, ms);
  return true;
}

bool measureCeLatency(const Buffers& b, int src, int dst, int iters, double* us) {
  ICN_CUDA_OK(cudaSetDevice(src));
  float ms = 0;
  auto copy = [&] { return cudaMemcpyPeerAsync(b.big2[dst], dst, b.big[src], src, 8, b.stream[src]); };
  if (!icnprobe::timeOnStream(b.stream[src], iters, copy, &ms)) return false;
  *us = ms * 1000.0 / iters;
  return true;
}

bool measurePingPong(const Buffers& b, int x, int y, int rounds, double* oneWayUs, std::string* note) {
  // flag[d] holds two ints on GPU d: [0] the flag, [1] a failure marker; plus a timer slot.
  unsigned long long* elapsed = nullptr;
  int* failed[2] = {nullptr, nullptr};
  ICN_CUDA_OK(cudaSetDevice(x));
  ICN_CUDA_OK(cudaMalloc(&elapsed, sizeof(unsigned long long)));
  for (int side = 0; side < 2; side++) {
    int d = side == 0 ? x : y;
    ICN_CUDA_OK(cudaSetDevice(d));
    ICN_CUDA_OK(cudaMalloc(&failed[side], sizeof(int)));
    ICN_CUDA_OK(cudaMemset(failed[side], 0, sizeof(int)));
    ICN_CUDA_OK(cudaMemset(b.flag[d], 0, sizeof(int)));
    ICN_CUDA_OK(cudaDeviceSynchronize());
  }
  ICN_CUDA_OK(cudaSetDevice(y));
  pingPong<<<1, 1, 0, b.stream[y]>>>(b.flag[y], b.flag[x], rounds, false, nullptr, failed[1]);
  ICN_CUDA_OK(cudaGetLastError());
  ICN_CUDA_OK(cudaSetDevice(x));
  pingPong<<<1, 1, 0, b.stream[x]>>>(b.flag[x], b.flag[y], rounds, true, elapsed, failed[0]);
  ICN_CUDA_OK(cudaGetLastError());
  ICN_CUDA_OK(cudaStreamSynchronize(b.stream[x]));
  ICN_CUDA_OK(cudaSetDevice(y));
  ICN_CUDA_OK(cudaStreamSynchronize(b.stream[y]));
  int f0 = 0, f1 = 0;
  unsigned long long ns = 0;
  ICN_CUDA_OK(cudaMemcpy(&f1, failed[1], sizeof(int), cudaMemcpyDeviceToHost));
  ICN_CUDA_OK(cudaFree(failed[1]));
  ICN_CUDA_OK(cudaSetDevice(x));
  ICN_CUDA_OK(cudaMemcpy(&f0, failed[0], sizeof(int), cudaMemcpyDeviceToHost));
  ICN_CUDA_OK(cudaMemcpy(&ns, elapsed, sizeof(ns), cudaMemcpyDeviceToHost));
  ICN_CUDA_OK(cudaFree(failed[0]));
  ICN_CUDA_OK(cudaFree(elapsed));
  if (f0 || f1) {
    *note = "ping-pong timed out (kernels on both GPUs did not run at the same time)";
    *oneWayUs = 0;
    return true;
  }
  *oneWayUs = ns / 1000.0 / rounds / 2.0;
  return true;
}

void printMatrix(const char* title, const std::vector<Gpu>& gpus, const std::vector<std::vector<PairResult>>& r,
                 double PairResult::*field, const char* fmt) {
  printf("\n%s\n%6s", title, "src\\dst");
  for (const Gpu& g : gpus) printf(" %9d", g.dev);
  printf("\n");
  for (size_t i = 0; i < gpus.size(); i++) {
    printf("%6d ", gpus[i].dev);
    for (size_t j = 0; j < gpus.size(); j++) {
      if (i == j || !r[i][j].peer) printf(" %9s", i == j ? "-" : "no-p2p");
      else printf(fmt, r[i][j].*field);
    }
    printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  icnprobe::ProbeCli cli("icn-nvlink-bw", "GPU-pair NVLink/PCIe copy bandwidth and latency versus the NVML link rate",
                         "bytes per copy for the bandwidth tests (K/M/G)", "20");
  cli.options().add("lat_iters", "2000", "8-byte copies / ping-pong round trips per latency measurement");
  int rc = 0;
  if (!cli.parse(argc, argv, sizeof(int4), &rc)) return rc;
  const int latIters = static_cast<int>(cli.options().integer("lat_iters"));
  if (latIters < 1) {
    fprintf(stderr, "icn-nvlink-bw: --lat_iters must be >= 1\n");
    return 2;
  }
  if (!icnprobe::resolveDevices(cli, &rc)) return rc;
  const size_t size = cli.size;
  const int iters = cli.iters;
  const std::vector<int>& devs = cli.devices;
  std::vector<Gpu> gpus;
  for (int d : devs) {
    Gpu g;
    g.dev = d;
    cudaDeviceProp p;
    char bus[32] = {};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof(bus), d) != cudaSuccess) {
      fprintf(stderr, "icn-nvlink-bw: cannot query device %d\n", d);
      return 1;
    }
    g.name = p.name;
    g.busId = bus;
    g.nvl = icnprobe::queryNvlink(g.busId, p.major, p.minor);
    gpus.push_back(g);
  }

  printf("# icn-nvlink-bw: %zu GPUs, %zu-byte copies x %d, %d latency rounds\n", gpus.size(), size, iters, latIters);
  for (const Gpu& g : gpus) {
    if (g.nvl.activeLinks > 0)
      printf("GPU %d %s %s: NVLink v%d, %d active links x %.1f GB/s = %.0f GB/s per direction%s\n", g.dev, g.name.c_str(),
             g.busId.c_str(), g.nvl.version, g.nvl.activeLinks, g.nvl.linkMBps / 1000.0,
             g.nvl.activeLinks * g.nvl.linkMBps / 1000.0, g.nvl.linkRateSource == 2 ? " (rate from the NVLink generation)" : "");
    else
      printf("GPU %d %s %s: no active NVLink%s%s\n", g.dev, g.name.c_str(), g.busId.c_str(),
             g.nvl.error.empty() ? "" : " - ", g.nvl.error.c_str());
    if (!g.nvl.note.empty()) printf("GPU %d: %s\n", g.dev, g.nvl.note.c_str());
  }

  Buffers b;
  int maxDev = 0;
  for (int d : devs) maxDev = std::max(maxDev, d);
  b.big.assign(maxDev + 1, nullptr);
  b.big2.assign(maxDev + 1, nullptr);
  b.flag.assign(maxDev + 1, nullptr);
  b.stream.assign(maxDev + 1, nullptr);
  auto setup = [&]() -> bool {
    for (int d : devs) {
      ICN_CUDA_OK(cudaSetDevice(d));
      ICN_CUDA_OK(cudaMalloc(&b.big[d], size));
      ICN_CUDA_OK(cudaMalloc(&b.big2[d], size));
      ICN_CUDA_OK(cudaMemset(b.big[d], 1, size));
      ICN_CUDA_OK(cudaMalloc(&b.flag[d], sizeof(int)));
      ICN_CUDA_OK(cudaStreamCreateWithFlags(&b.stream[d], cudaStreamNonBlocking));
      for (int peer : devs) {
        int can = 0;
        if (peer == d) continue;
        ICN_CUDA_OK(cudaDeviceCanAccessPeer(&can, d, peer));
        if (can) {
          cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
          if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) ICN_CUDA_OK(e);
          cudaGetLastError();  // clear "already enabled"
        }
      }
    }
    return true;
  };
  if (!setup()) return 1;

  size_t n = gpus.size();
  std::vector<std::vector<PairResult>> res(n, std::vector<PairResult>(n));
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++) {
      if (i == j) continue;
      int x = gpus[i].dev, y = gpus[j].dev;
      PairResult& r = res[i][j];
      int can = 0;
      cudaDeviceCanAccessPeer(&can, x, y);
      r.peer = can != 0;
      if (!r.peer) continue;
      bool ok = measureCe(b, x, y, size, iters, &r.ceUni) && measureSm(b, x, y, size, iters, &r.smWrite) &&
                measureCeLatency(b, x, y, latIters, &r.ceLatUs);
      if (ok && i < j) ok = measureBidir(b, x, y, size, iters, &r.ceBidir) && measurePingPong(b, x, y, latIters, &r.pingOneWayUs, &r.note);
      if (!ok) return 1;
      if (i < j) {
        res[j][i].ceBidir = r.ceBidir;
        res[j][i].pingOneWayUs = r.pingOneWayUs;
      }
    }
  }

  printMatrix("Copy-engine bandwidth, one direction (GB/s)", gpus, res, &PairResult::ceUni, " %9.1f");
  printMatrix("Copy-engine bandwidth, both directions at once (GB/s, sum)", gpus, res, &PairResult::ceBidir, " %9.1f");
  printMatrix("SM-kernel write bandwidth into the peer (GB/s)", gpus, res, &PairResult::smWrite, " %9.1f");
  printMatrix("8-byte copy-engine peer copy latency (us)", gpus, res, &PairResult::ceLatUs, " %9.2f");
  printMatrix("SM ping-pong one-way latency (us)", gpus, res, &PairResult::pingOneWayUs, " %9.2f");

  // Against the links: a pair can use at most the smaller side's link bandwidth.
  std::string pairsJson;
  printf("\nAgainst the NVLink rate (per direction):\n");
  for (size_t i = 0; i < n; i++) {
    for (size_t j = i + 1; j < n; j++) {
      const Gpu &a = gpus[i], &c = gpus[j];
      const PairResult& r = res[i][j];
      int links = std::min(a.nvl.activeLinks, c.nvl.activeLinks);
      double rate = std::min(a.nvl.linkMBps, c.nvl.linkMBps) / 1000.0;
      double peak = links * rate;
      double best = std::max(std::max(r.ceUni, res[j][i].ceUni), std::max(r.smWrite, res[j][i].smWrite));
      if (peak > 0 && r.peer)
        printf("  GPU %d <-> GPU %d: NV%d x %.1f GB/s = %.0f GB/s; best measured %.1f GB/s (%.0f%%), both directions %.1f GB/s (%.0f%% of %.0f)\n",
               a.dev, c.dev, links, rate, peak, best, 100.0 * best / peak, r.ceBidir, 100.0 * r.ceBidir / (2 * peak), 2 * peak);
      else
        printf("  GPU %d <-> GPU %d: %s; best measured %.1f GB/s\n", a.dev, c.dev,
               r.peer ? "NVLink rate unknown (NVML)" : "no peer access", best);
      if (!r.note.empty()) printf("    note: %s\n", r.note.c_str());
      icnprobe::appendJsonItem(
          pairsJson,
          "{\"a\":%d,\"b\":%d,\"peer\":%s,\"links\":%d,\"link_GBps\":%.3f,\"peak_GBps\":%.3f,"
          "\"ce_a_to_b_GBps\":%.3f,\"ce_b_to_a_GBps\":%.3f,\"ce_bidir_GBps\":%.3f,\"sm_a_to_b_GBps\":%.3f,"
          "\"sm_b_to_a_GBps\":%.3f,\"ce_latency_us\":%.3f,\"pingpong_one_way_us\":%.3f,\"best_GBps\":%.3f,"
          "\"pct_of_peak\":%.2f,\"note\":\"%s\"}",
          a.dev, c.dev, r.peer ? "true" : "false", links, rate, peak, r.ceUni, res[j][i].ceUni, r.ceBidir,
          r.smWrite, res[j][i].smWrite, r.ceLatUs, r.pingOneWayUs, best, peak > 0 ? 100.0 * best / peak : 0.0,
          icnprobe::jsonEscape(r.note).c_str());
    }
  }

  std::string gpusJson;
  for (const Gpu& g : gpus) {
    icnprobe::appendJsonItem(
        gpusJson,
        "{\"dev\":%d,\"name\":\"%s\",\"pci\":\"%s\",\"nvml\":%s,\"nvlink_active\":%d,\"nvlink_version\":%d,"
        "\"nvml_nvlink_version_enum\":%d,\"link_MBps\":%.1f,\"link_rate_source\":\"%s\",\"error\":\"%s\","
        "\"note\":\"%s\"}",
        g.dev, icnprobe::jsonEscape(g.name).c_str(), g.busId.c_str(), g.nvl.nvmlAvailable ? "true" : "false",
        g.nvl.activeLinks, g.nvl.version, g.nvl.nvmlVersion, g.nvl.linkMBps,
        g.nvl.linkRateSource == 1 ? "nvml" : g.nvl.linkRateSource == 2 ? "generation" : "none",
        icnprobe::jsonEscape(g.nvl.error).c_str(), icnprobe::jsonEscape(g.nvl.note).c_str());
  }
  if (!cli.writeReport(",\"lat_iters\":" + std::to_string(latIters) + ",\"gpus\":[" + gpusJson + "],\"pairs\":[" +
                       pairsJson + "]"))
    return 1;

  for (int d : devs) {
    cudaSetDevice(d);
    cudaFree(b.big[d]);
    cudaFree(b.big2[d]);
    cudaFree(b.flag[d]);
    cudaStreamDestroy(b.stream[d]);
  }
  return 0;
}
