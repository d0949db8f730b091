// All-reduce timed for several NCCL configurations inside ONE process, interleaved, so they are compared under the
// same per-process conditions. On the 2x H200 machine small-message latency is bimodal from one process to the
// next (~13 vs ~19 us at 8 B, whatever the algorithm), which swamps a 3% comparison between separate processes.
//
// Each configuration is its own set of communicators (one per GPU, ncclCommInitAll, like nccl-tests -g N) created
// with its own environment: NCCL reads NCCL_ALGO/NCCL_PROTO and ICN reads ICN_TUNER/ICN_TUNER_CACHE at each
// communicator's init.
//
//   icn-paired-allreduce [-b 8] [-e 32M] [-f 4] [-n 20] [-w 5] [-l 2] [-L 40] [-r 10] [-R 10] [-g 2] [-o out.json]
//                        CONFIG...
//   CONFIG = name[:VAR=VALUE[,VAR=VALUE...]]   e.g. default:ICN_TUNER=off  Ring-LL:NCCL_ALGO=Ring,NCCL_PROTO=LL
//
// Phases: learning (-l sweeps; every size, every configuration in turn, -L untimed calls), then -r measured
// rounds: per size, the configurations in an order rotated each round, each a block of -w untimed calls then -n
// timed ones (host clock from the first launch to both streams done, divided by n: nccl-tests' measure). Sizes up
// to 1 MiB take -R rounds instead: their blocks last microseconds and each lands in one of the latency modes, so
// many more of them cost nothing and resolve a few percent where -r rounds cannot.
// Prints a Markdown table (median per configuration and size) and writes every sample as JSON.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "driver_util.h"

namespace {

using icn::device::die;
using icn::device::parseInt;
using icn::device::parseSize;

// Every wait is bounded: a hung collective ends the run with a message instead of a hang.
constexpr double kSyncTimeoutS = 60.0;

struct Config {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<ncclComm_t> comms;
  std::map<size_t, std::vector<double>> us;  // per size, one sample per round
};

struct Options {
  size_t minBytes = 8, maxBytes = 32u << 20;
  int factor = 4, iters = 20, warmup = 5, learnSweeps = 2, learnCalls = 40, rounds = 10, gpus = 2;
  int smallRounds = -1;  // -R: rounds for sizes up to kSmallBytes (-1: as -r)
  static constexpr size_t kSmallBytes = 1u << 20;
  int roundsFor(size_t bytes) const { return bytes <= kSmallBytes && smallRounds >= 0 ? smallRounds : rounds; }
  std::string json;
};

Config parseConfig(const std::string& arg) {
  Config c;
  size_t colon = arg.find(':');
  c.name = arg.substr(0, colon);
  if (c.name.empty()) die("configuration without a name", arg.c_str());
  if (colon == std::string::npos) return c;
  std::string rest = arg.substr(colon + 1);
  size_t at = 0;
  while (at <= rest.size()) {
    size_t comma = rest.find(',', at);
    std::string kv = rest.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) die("expected VAR=VALUE in", arg.c_str());
    c.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return c;
}

struct Bench {
  Options opt;
  std::vector<Config> configs;
  std::vector<void*> send, recv;
  std::vector<cudaStream_t> streams;

  // Spins on the streams (as a timing loop must: no sleep granularity in the measure); NCCL's async errors and
  // the timeout are checked every millisecond.
  void syncAll() {
    auto start = std::chrono::steady_clock::now();
    auto nextCheck = start;
    for (int d = 0; d < opt.gpus; ++d) {
      for (;;) {
        cudaError_t e = cudaStreamQuery(streams[d]);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) die("cudaStreamQuery", cudaGetErrorString(e));
        auto now = std::chrono::steady_clock::now();
        if (now < nextCheck) continue;
        nextCheck = now + std::chrono::milliseconds(1);
        for (const Config& c : configs)
          for (ncclComm_t comm : c.comms) {
            ncclResult_t async = ncclSuccess;
            if (comm) ncclCommGetAsyncError(comm, &async);
            if (async != ncclSuccess && async != ncclInProgress) die("NCCL async error", ncclGetErrorString(async));
          }
        if (std::chrono::duration<double>(now - start).count() > kSyncTimeoutS)
          die("a collective did not finish within 60 s", nullptr);
      }
    }
  }

  void launch(Config& c, size_t bytes, int calls) {
    size_t count = bytes / sizeof(float);
    for (int i = 0; i < calls; ++i) {
      NCCL_OK(ncclGroupStart());
      for (int d = 0; d < opt.gpus; ++d)
        NCCL_OK(ncclAllReduce(send[d], recv[d], count, ncclFloat, ncclSum, c.comms[d], streams[d]));
      NCCL_OK(ncclGroupEnd());
    }
  }

  double timedBlock(Config& c, size_t bytes) {
    launch(c, bytes, opt.warmup);
    syncAll();
    auto t0 = std::chrono::steady_clock::now();
    launch(c, bytes, opt.iters);
    syncAll();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / opt.iters;
  }

  void init() {
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess || have < opt.gpus) {
      fprintf(stderr, "icn-paired-allreduce: needs %d CUDA devices, found %d\n", opt.gpus, have);
      exit(3);
    }
    send.resize(opt.gpus);
    recv.resize(opt.gpus);
    streams.resize(opt.gpus);
    for (int d = 0; d < opt.gpus; ++d) {
      CUDA_OK(cudaSetDevice(d));
      CUDA_OK(cudaMalloc(&send[d], opt.maxBytes));
      CUDA_OK(cudaMalloc(&recv[d], opt.maxBytes));
      CUDA_OK(cudaMemset(send[d], 0, opt.maxBytes));
      CUDA_OK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
    }
    // Every variable any configuration sets is cleared before each init, then restored for the process.
    std::map<std::string, std::pair<bool, std::string>> saved;
    for (const Config& c : configs)
      for (const auto& kv : c.env) {
        const char* v = getenv(kv.first.c_str());
        saved.emplace(kv.first, std::make_pair(v != nullptr, v ? std::string(v) : std::string()));
      }
    std::vector<int> devs(opt.gpus);
    for (int d = 0; d < opt.gpus; ++d) devs[d] = d;
    for (Config& c : configs) {
      for (const auto& s : saved) unsetenv(s.first.c_str());
      for (const auto& kv : c.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      c.comms.resize(opt.gpus);
      NCCL_OK(ncclCommInitAll(c.comms.data(), opt.gpus, devs.data()));
      fprintf(stderr, "# %s: communicators ready\n", c.name.c_str());
    }
    for (const auto& s : saved)
      if (s.second.first) setenv(s.first.c_str(), s.second.second.c_str(), 1); else unsetenv(s.first.c_str());
  }

  std::vector<size_t> sizes() const {
    std::vector<size_t> out;
    for (size_t b = opt.minBytes; b <= opt.maxBytes; b *= opt.factor) out.push_back(b);
    return out;
  }

  void run() {
    for (int s = 0; s < opt.learnSweeps; ++s)
      for (size_t bytes : sizes())
        for (Config& c : configs) {
          launch(c, bytes, opt.learnCalls);
          syncAll();
        }
    const size_t n = configs.size();
    const int total = std::max(opt.rounds, opt.smallRounds);
    for (int r = 0; r < total; ++r)
      for (size_t bytes : sizes())
        for (size_t k = 0; k < n && r < opt.roundsFor(bytes); ++k) {
          Config& c = configs[(k + r) % n];
          c.us[bytes].push_back(timedBlock(c, bytes));
        }
  }

  void finish() {
    // Destroying an online communicator writes its learned table (ICN_TUNER_CACHE).
    for (Config& c : configs)
      for (ncclComm_t comm : c.comms) NCCL_OK(ncclCommDestroy(comm));
  }

  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  }

  void report() const {
    printf("| size |");
    for (const Config& c : configs) printf(" %s |", c.name.c_str());
    printf("\n|---:|");
    for (size_t i = 0; i < configs.size(); ++i) printf("---:|");
    printf("\n");
    for (size_t bytes : sizes()) {
      printf("| %zu |", bytes);
      for (const Config& c : configs) printf(" %.2f |", median(c.us.at(bytes)));
      printf("\n");
    }
    if (opt.json.empty()) return;
    FILE* f = fopen(opt.json.c_str(), "w");
    if (!f) die("cannot write", opt.json.c_str());
    fprintf(f, "{\"iters\":%d,\"warmup\":%d,\"rounds\":%d,\"small_rounds\":%d,\"gpus\":%d,\"configs\":[", opt.iters,
            opt.warmup, opt.rounds, opt.roundsFor(Options::kSmallBytes), opt.gpus);
    for (size_t i = 0; i < configs.size(); ++i) {
      const Config& c = configs[i];
      // Configuration names and environment values come from the command line: quoted as JSON strings.
      fprintf(f, "%s{\"name\":%s,\"env\":{", i ? "," : "", icn::json::quote(c.name).c_str());
      for (size_t j = 0; j < c.env.size(); ++j)
        fprintf(f, "%s%s:%s", j ? "," : "", icn::json::quote(c.env[j].first).c_str(),
                icn::json::quote(c.env[j].second).c_str());
      fprintf(f, "},\"us\":{");
      bool first = true;
      for (const auto& kv : c.us) {
        fprintf(f, "%s\"%zu\":[", first ? "" : ",", kv.first);
        for (size_t j = 0; j < kv.second.size(); ++j) fprintf(f, "%s%.3f", j ? "," : "", kv.second[j]);
        fprintf(f, "]");
        first = false;
      }
      fprintf(f, "}}");
    }
    fprintf(f, "]}\n");
    fclose(f);
  }
};

void usage() {
  fprintf(stderr,
          "usage: icn-paired-allreduce [-b 8] [-e 32M] [-f 4] [-n 20] [-w 5] [-l 2] [-L 40] [-r 10] [-R 10] "
          "[-g 2] [-o out.json] CONFIG...\n  CONFIG = name[:VAR=VALUE[,VAR=VALUE...]]\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    if (i + 1 >= argc || strlen(argv[i]) != 2) usage();
    const char* v = argv[++i];
    switch (argv[i - 1][1]) {
      case 'b': b.opt.minBytes = parseSize(v); break;
      case 'e': b.opt.maxBytes = parseSize(v); break;
      case 'f': b.opt.factor = parseInt(v, 2, 1024); break;
      case 'n': b.opt.iters = parseInt(v, 1, 100000); break;
      case 'w': b.opt.warmup = parseInt(v, 0, 100000); break;
      case 'l': b.opt.learnSweeps = parseInt(v, 0, 1000); break;
      case 'L': b.opt.learnCalls = parseInt(v, 1, 100000); break;
      case 'r': b.opt.rounds = parseInt(v, 1, 100000); break;
      case 'R': b.opt.smallRounds = parseInt(v, 1, 100000); break;
      case 'g': b.opt.gpus = parseInt(v, 1, 64); break;
      case 'o': b.opt.json = v; break;
      default: usage();
    }
  }
  if (i >= argc || b.opt.minBytes > b.opt.maxBytes || b.opt.minBytes < sizeof(float)) usage();
  for (; i < argc; ++i) b.configs.push_back(parseConfig(argv[i]));
  b.init();
  b.run();
  b.finish();
  b.report();
  return 0;
}
