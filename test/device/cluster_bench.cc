// One rank of an N-node NCCL benchmark: every collective users run (all_reduce, all_gather, reduce_scatter,
// alltoall, sendrecv), sizes from 8 B up, each configuration its own communicator inside this process (NCCL reads
// NCCL_ALGO/NCCL_PROTO and ICN reads ICN_TUNER/ICN_TUNER_CACHE at each communicator's init), timed in interleaved
// rounds so that every configuration meets the same machine. One process per rank, each started in its own
// emulated host (test/device/cluster_proof.sh); the ranks meet through a file holding one NCCL unique id per
// configuration, written by rank 0.
//
//   icn-cluster-bench -r RANK -N NRANKS -i IDFILE [-O ops] [-b 8] [-e 128M] [-f 16] [-n 20] [-w 5] [-R 3]
//                     [-l 0] [-L 40] [-t LABEL] CONFIG...
//   CONFIG = name[:VAR=VALUE[,VAR=VALUE...]]   e.g. default:ICN_TUNER=off  Tree-LL:NCCL_ALGO=Tree,NCCL_PROTO=LL
//
// Every collective's data is checked once per configuration, operation and size before it is timed (a rank with
// wrong elements prints them and exits 1 at the end). A timed block is -w untimed calls then -n timed ones (host
// clock from the first launch to the stream done, divided by n, as nccl-tests measures); -R rounds, the
// configurations' order rotated each round. -l sweeps of -L untimed calls per size and configuration come first
// (an online tuner's exploration). Rank 0 prints one "CLUSTER {json}" line per timed block.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "driver_util.h"

namespace {

using icn::device::die;
using icn::device::parseInt;
using icn::device::parseSize;

constexpr double kSyncTimeoutS = 120.0;  // a hung collective ends the run with a message, not a hang
constexpr double kRendezvousTimeoutS = 120.0;

enum class Op { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv };
const char* opName(Op op) {
  switch (op) {
    case Op::AllReduce: return "all_reduce";
    case Op::AllGather: return "all_gather";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::AllToAll: return "alltoall";
    case Op::SendRecv: return "sendrecv";
  }
  return "?";
}
std::vector<Op> parseOps(const std::string& list) {
  std::vector<Op> out;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    bool found = false;
    for (Op op : {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::AllToAll, Op::SendRecv})
      if (name == opName(op)) {
        out.push_back(op);
        found = true;
      }
    if (!found) die("unknown operation", name.c_str());
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

struct Config {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;
  ncclComm_t comm = nullptr;
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

struct Options {
  int rank = -1, nranks = 0;
  std::string idFile, label = "bench", ops = "all_reduce";
  size_t minBytes = 8, maxBytes = 128u << 20;
  int factor = 16, iters = 20, warmup = 5, rounds = 3, learnSweeps = 0, learnCalls = 40;
};

// Elements each rank contributes and receives for `bytes` (nccl-tests' convention: bytes is the whole buffer).
struct Shape {
  size_t sendCount, recvCount;
};

class Bench {
 public:
  explicit Bench(Options o, std::vector<Config> configs) : opt_(std::move(o)), configs_(std::move(configs)) {}

  void init() {
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess || have < 1) {
      fprintf(stderr, "icn-cluster-bench: needs a CUDA device, found %d\n", have);
      exit(3);
    }
    CUDA_OK(cudaSetDevice(0));
    const size_t cap = opt_.maxBytes + 64 * sizeof(float) * static_cast<size_t>(opt_.nranks);
    CUDA_OK(cudaMalloc(&send_, cap));
    CUDA_OK(cudaMalloc(&recv_, cap));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    hostSend_.resize(cap / sizeof(float));
    hostRecv_.resize(cap / sizeof(float));
    std::vector<ncclUniqueId> ids = rendezvous();
    std::map<std::string, std::pair<bool, std::string>> saved;
    for (const Config& c : configs_)
      for (const auto& kv : c.env) {
        const char* v = getenv(kv.first.c_str());
        saved.emplace(kv.first, std::make_pair(v != nullptr, v ? std::string(v) : std::string()));
      }
    for (size_t k = 0; k < configs_.size(); ++k) {
      Config& c = configs_[k];
      for (const auto& s : saved) unsetenv(s.first.c_str());
      for (const auto& kv : c.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      auto t0 = std::chrono::steady_clock::now();
      NCCL_OK(ncclCommInitRank(&c.comm, opt_.nranks, ids[k], opt_.rank));
      if (opt_.rank == 0)
        emit("{\"op\":\"init\",\"config\":" + icn::json::quote(c.name) + ",\"s\":" +
             std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) + "}");
    }
    for (const auto& s : saved)
      if (s.second.first) setenv(s.first.c_str(), s.second.second.c_str(), 1); else unsetenv(s.first.c_str());
  }

  void run() {
    const std::vector<Op> ops = parseOps(opt_.ops);
    for (Op op : ops)
      for (size_t bytes : sizes())
        for (Config& c : configs_) wrong_ += check(c, op, bytes);
    for (int s = 0; s < opt_.learnSweeps; ++s)
      for (Op op : ops)
        for (size_t bytes : sizes())
          for (Config& c : configs_) {
            launch(c, op, bytes, opt_.learnCalls);
            sync(c);
          }
    const size_t n = configs_.size();
    for (int r = 0; r < opt_.rounds; ++r)
      for (Op op : ops)
        for (size_t bytes : sizes())
          for (size_t k = 0; k < n; ++k) {
            Config& c = configs_[(k + static_cast<size_t>(r)) % n];
            const double us = timedBlock(c, op, bytes);
            if (opt_.rank == 0)
              emit("{\"op\":\"" + std::string(opName(op)) + "\",\"config\":" + icn::json::quote(c.name) +
                   ",\"bytes\":" + std::to_string(bytes) + ",\"round\":" + std::to_string(r) +
                   ",\"us\":" + std::to_string(us) + ",\"busbw_gbs\":" + std::to_string(busBw(op, bytes, us)) + "}");
          }
  }

  int finish() {
    for (Config& c : configs_) NCCL_OK(ncclCommDestroy(c.comm));  // an online tuner writes its table here
    if (wrong_ > 0) {
      fflush(stdout);
      fprintf(stderr, "icn-cluster-bench: rank %d saw %zu wrong elements\n", opt_.rank, wrong_);
      return 1;
    }
    return 0;
  }

 private:
  std::vector<size_t> sizes() const {
    std::vector<size_t> out;
    for (size_t b = opt_.minBytes; b <= opt_.maxBytes; b *= static_cast<size_t>(opt_.factor)) out.push_back(b);
    return out;
  }

  void emit(const std::string& body) const {
    std::string line = body;
    line.insert(1, "\"label\":" + icn::json::quote(opt_.label) + ",\"nranks\":" + std::to_string(opt_.nranks) + ",");
    printf("CLUSTER %s\n", line.c_str());
    fflush(stdout);
  }

  // Rank 0 writes one unique id per configuration (atomically: a temporary file renamed); the others wait for it.
  std::vector<ncclUniqueId> rendezvous() {
    std::vector<ncclUniqueId> ids(configs_.size());
    if (opt_.rank == 0) {
      for (auto& id : ids) NCCL_OK(ncclGetUniqueId(&id));
      const std::string tmp = opt_.idFile + ".tmp." + std::to_string(getpid());
      std::ofstream f(tmp, std::ios::binary);
      f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(ncclUniqueId)));
      f.close();
      if (!f || rename(tmp.c_str(), opt_.idFile.c_str()) != 0) die("cannot write", opt_.idFile.c_str());
      return ids;
    }
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      std::ifstream f(opt_.idFile, std::ios::binary);
      if (f && f.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(ncclUniqueId))))
        return ids;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kRendezvousTimeoutS)
        die("no unique ids from rank 0 in", opt_.idFile.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  Shape shape(Op op, size_t bytes) const {
    const size_t total = std::max<size_t>(1, bytes / sizeof(float));
    const size_t per = std::max<size_t>(1, total / static_cast<size_t>(opt_.nranks));
    const size_t n = static_cast<size_t>(opt_.nranks);
    switch (op) {
      case Op::AllReduce: return {total, total};
      case Op::AllGather: return {per, per * n};
      case Op::ReduceScatter: return {per * n, per};
      case Op::AllToAll: return {per * n, per * n};
      case Op::SendRecv: return {total, total};
    }
    return {0, 0};
  }

  double busBw(Op op, size_t bytes, double us) const {
    const double n = opt_.nranks;
    const double factor = op == Op::AllReduce ? 2 * (n - 1) / n : op == Op::SendRecv ? 1.0 : (n - 1) / n;
    const Shape s = shape(op, bytes);
    const double moved = static_cast<double>(std::max(s.sendCount, s.recvCount)) * sizeof(float);
    return moved * factor / us / 1e3;
  }

  void launch(Config& c, Op op, size_t bytes, int calls) {
    const Shape s = shape(op, bytes);
    const int n = opt_.nranks, r = opt_.rank;
    auto* in = static_cast<float*>(send_);
    auto* out = static_cast<float*>(recv_);
    for (int i = 0; i < calls; ++i) {
      switch (op) {
        case Op::AllReduce: NCCL_OK(ncclAllReduce(in, out, s.sendCount, ncclFloat, ncclSum, c.comm, stream_)); break;
        case Op::AllGather: NCCL_OK(ncclAllGather(in, out, s.sendCount, ncclFloat, c.comm, stream_)); break;
        case Op::ReduceScatter:
          NCCL_OK(ncclReduceScatter(in, out, s.recvCount, ncclFloat, ncclSum, c.comm, stream_));
          break;
        case Op::AllToAll: {
          const size_t per = s.sendCount / static_cast<size_t>(n);
          NCCL_OK(ncclGroupStart());
          for (int p = 0; p < n; ++p) {
            NCCL_OK(ncclSend(in + per * static_cast<size_t>(p), per, ncclFloat, p, c.comm, stream_));
            NCCL_OK(ncclRecv(out + per * static_cast<size_t>(p), per, ncclFloat, p, c.comm, stream_));
          }
          NCCL_OK(ncclGroupEnd());
          break;
        }
        case Op::SendRecv:
          NCCL_OK(ncclGroupStart());
          NCCL_OK(ncclSend(in, s.sendCount, ncclFloat, (r + 1) % n, c.comm, stream_));
          NCCL_OK(ncclRecv(out, s.recvCount, ncclFloat, (r + n - 1) % n, c.comm, stream_));
          NCCL_OK(ncclGroupEnd());
          break;
      }
    }
  }

  // Spins on the stream (a timing loop must not sleep); NCCL's async error and the timeout are checked every ms.
  void sync(Config& c) {
    auto start = std::chrono::steady_clock::now();
    auto nextCheck = start;
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) die("cudaStreamQuery", cudaGetErrorString(e));
      auto now = std::chrono::steady_clock::now();
      if (now < nextCheck) continue;
      nextCheck = now + std::chrono::milliseconds(1);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(c.comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) die("NCCL async error", ncclGetErrorString(async));
      if (std::chrono::duration<double>(now - start).count() > kSyncTimeoutS)
        die("a collective did not finish in time on", c.name.c_str());
    }
  }

  // Sizes from 64 MiB take a quarter of the calls (at least 3): each call lasts milliseconds already.
  double timedBlock(Config& c, Op op, size_t bytes) {
    const bool big = bytes >= (64u << 20);
    const int iters = big ? std::max(3, opt_.iters / 4) : opt_.iters;
    launch(c, op, bytes, big ? std::min(opt_.warmup, 1) : opt_.warmup);
    sync(c);
    auto t0 = std::chrono::steady_clock::now();
    launch(c, op, bytes, iters);
    sync(c);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  }

  // Fills the send buffer with values that make every element's expected result known, runs the collective once
  // and counts the elements that differ (values are small integers: exact in float).
  size_t check(Config& c, Op op, size_t bytes) {
    const Shape s = shape(op, bytes);
    const size_t n = static_cast<size_t>(opt_.nranks), r = static_cast<size_t>(opt_.rank);
    const size_t per = s.sendCount / (op == Op::AllToAll ? n : 1);
    for (size_t i = 0; i < s.sendCount; ++i)
      hostSend_[i] = op == Op::AllToAll ? static_cast<float>(r * n + i / per) : static_cast<float>(r + 1 + i % 7);
    // On the benchmark's own stream: it does not wait for the legacy default stream, so plain cudaMemcpy and
    // cudaMemset could still be writing the buffers while the collective reads them.
    CUDA_OK(cudaMemcpyAsync(send_, hostSend_.data(), s.sendCount * sizeof(float), cudaMemcpyHostToDevice, stream_));
    CUDA_OK(cudaMemsetAsync(recv_, 0xff, s.recvCount * sizeof(float), stream_));
    launch(c, op, bytes, 1);
    sync(c);  // bounded, with NCCL's errors checked, before the copy that waits for it
    CUDA_OK(cudaMemcpyAsync(hostRecv_.data(), recv_, s.recvCount * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    sync(c);
    size_t wrong = 0;
    const double sumRanks = static_cast<double>(n * (n + 1) / 2);
    for (size_t i = 0; i < s.recvCount; ++i) {
      double want = 0;
      switch (op) {
        case Op::AllReduce: want = sumRanks + static_cast<double>(n * (i % 7)); break;
        case Op::AllGather: want = static_cast<double>(i / s.sendCount + 1 + (i % s.sendCount) % 7); break;
        case Op::ReduceScatter: want = sumRanks + static_cast<double>(n * ((r * s.recvCount + i) % 7)); break;
        case Op::AllToAll: want = static_cast<double>((i / per) * n + r); break;
        case Op::SendRecv: want = static_cast<double>((r + n - 1) % n + 1 + i % 7); break;
      }
      wrong += hostRecv_[i] != static_cast<float>(want);
    }
    if (wrong)
      printf("CLUSTER {\"label\":%s,\"rank\":%d,\"config\":%s,\"op\":\"%s\",\"bytes\":%zu,\"wrong\":%zu}\n",
             icn::json::quote(opt_.label).c_str(), opt_.rank, icn::json::quote(c.name).c_str(), opName(op), bytes,
             wrong);
    fflush(stdout);  // the log interleaves stdout and stderr: whole lines only
    return wrong;
  }

  Options opt_;
  std::vector<Config> configs_;
  void *send_ = nullptr, *recv_ = nullptr;
  cudaStream_t stream_{};
  std::vector<float> hostSend_, hostRecv_;
  size_t wrong_ = 0;
};

void usage() {
  fprintf(stderr,
          "usage: icn-cluster-bench -r RANK -N NRANKS -i IDFILE [-O all_reduce,all_gather,reduce_scatter,alltoall,"
          "sendrecv] [-b 8] [-e 128M] [-f 16] [-n 20] [-w 5] [-R 3] [-l 0] [-L 40] [-t LABEL] CONFIG...\n"
          "  CONFIG = name[:VAR=VALUE[,VAR=VALUE...]]\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    if (i + 1 >= argc || strlen(argv[i]) != 2) usage();
    const char* v = argv[++i];
    switch (argv[i - 1][1]) {
      case 'r': o.rank = parseInt(v, 0, 4095); break;
      case 'N': o.nranks = parseInt(v, 1, 4096); break;
      case 'i': o.idFile = v; break;
      case 'O': o.ops = v; parseOps(o.ops); break;
      case 'b': o.minBytes = parseSize(v); break;
      case 'e': o.maxBytes = parseSize(v); break;
      case 'f': o.factor = parseInt(v, 2, 1024); break;
      case 'n': o.iters = parseInt(v, 1, 100000); break;
      case 'w': o.warmup = parseInt(v, 0, 100000); break;
      case 'R': o.rounds = parseInt(v, 1, 100000); break;
      case 'l': o.learnSweeps = parseInt(v, 0, 1000); break;
      case 'L': o.learnCalls = parseInt(v, 1, 100000); break;
      case 't': o.label = v; break;
      default: usage();
    }
  }
  if (i >= argc || o.rank < 0 || o.rank >= o.nranks || o.idFile.empty() || o.minBytes > o.maxBytes ||
      o.minBytes < sizeof(float))
    usage();
  std::vector<Config> configs;
  for (; i < argc; ++i) configs.push_back(parseConfig(argv[i]));
  Bench b(std::move(o), std::move(configs));
  b.init();
  b.run();
  return b.finish();
}
