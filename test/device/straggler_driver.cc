// One rank of a training-like NCCL loop for the straggler and hang proof (test/device/straggler_proof.sh): each
// iteration an all_reduce and an alltoall, then the host waits for the stream (as a training step waits for its
// gradients), for a given duration. Every second (-P; also while a collective is stuck) it prints a PROGRESS line with
// the wall-clock time and the iterations done, so a stall is visible in the log; every -c iterations it copies the
// results back and checks every element. One process per rank, each in its own emulated host; ranks meet through a
// file holding an NCCL unique id written by rank 0 (as icn-cluster-bench).
//
//   icn-straggler-driver -r RANK -N NRANKS -i IDFILE [-T 60] [-s 1M] [-a 1M] [-c 50] [-p PIDFILE] [-d DELAYFILE]
//                        [-x STOPFILE] [-P 1000]
//   -T   seconds to run (rank 0's clock decides; every rank stops at the same iteration)
//   -s   all_reduce bytes; -a alltoall bytes (the whole buffer, nccl-tests' convention)
//   -p   file to write this process's pid into (the script stops and throttles it)
//   -d   a file holding microseconds to sleep before each iteration, read again every 100 ms (absent: 0): a rank
//        that comes late to every collective
//   -x   a file whose existence ends the run early (any rank may see it)
//   -P   milliseconds between PROGRESS lines (10-60000): shorter periods time a stall more finely
// Lines: PROGRESS {"t":unix_s,"rank":r,"iter":n,"per_s":x} every -P ms, DONE {...}; WRONG {...} and exit 1 on a
// wrong element.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "driver_util.h"

namespace {

using icn::device::die;
using icn::device::parseInt;
using icn::device::parseSize;

constexpr double kSyncTimeoutS = 300.0;  // a stopped rank is held for seconds; a real hang still ends the run
constexpr double kRendezvousTimeoutS = 120.0;
constexpr int kStopEvery = 16;  // iterations between the stop-flag all_reduce (rank 0's decision to everyone)

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Options {
  int rank = -1, nranks = 0, seconds = 60, checkEvery = 50, progressMs = 1000;
  size_t arBytes = 1u << 20, a2aBytes = 1u << 20;
  std::string idFile, pidFile, delayFile, stopFile;
};

class Driver {
 public:
  explicit Driver(Options o) : opt_(std::move(o)) {}

  void init() {
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess || have < 1) {
      fprintf(stderr, "icn-straggler-driver: needs a CUDA device, found %d\n", have);
      exit(3);
    }
    if (!opt_.pidFile.empty()) {
      std::ofstream f(opt_.pidFile);
      f << getpid() << "\n";
      if (!f) die("cannot write", opt_.pidFile.c_str());
    }
    CUDA_OK(cudaSetDevice(0));
    n_ = static_cast<size_t>(opt_.nranks);
    arCount_ = std::max<size_t>(1, opt_.arBytes / sizeof(float));
    per_ = std::max<size_t>(1, opt_.a2aBytes / sizeof(float) / n_);
    CUDA_OK(cudaMalloc(&arIn_, arCount_ * sizeof(float)));
    CUDA_OK(cudaMalloc(&arOut_, arCount_ * sizeof(float)));
    CUDA_OK(cudaMalloc(&a2aIn_, per_ * n_ * sizeof(float)));
    CUDA_OK(cudaMalloc(&a2aOut_, per_ * n_ * sizeof(float)));
    CUDA_OK(cudaMalloc(&flag_, sizeof(int)));
    // Pinned, so the flag's copies are queued on the stream like the collectives (a pageable copy would block here).
    CUDA_OK(cudaMallocHost(&hostFlag_, sizeof(int)));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Inputs never change (the collectives are out of place), so every iteration's result is the same known one.
    const size_t r = static_cast<size_t>(opt_.rank);
    std::vector<float> h(std::max(arCount_, per_ * n_));
    for (size_t i = 0; i < arCount_; ++i) h[i] = static_cast<float>(r + 1 + i % 7);
    CUDA_OK(cudaMemcpy(arIn_, h.data(), arCount_ * sizeof(float), cudaMemcpyHostToDevice));
    for (size_t i = 0; i < per_ * n_; ++i) h[i] = static_cast<float>(r * n_ + i / per_);
    CUDA_OK(cudaMemcpy(a2aIn_, h.data(), per_ * n_ * sizeof(float), cudaMemcpyHostToDevice));
    ncclUniqueId id = rendezvous();
    auto t0 = std::chrono::steady_clock::now();
    NCCL_OK(ncclCommInitRank(&comm_, opt_.nranks, id, opt_.rank));
    printf("INIT {\"t\":%.3f,\"rank\":%d,\"s\":%.3f}\n", unixNow(), opt_.rank,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    fflush(stdout);
  }

  int run() {
    const auto start = std::chrono::steady_clock::now();
    lastPrint_ = start;
    for (;;) {
      sleepDelay();
      NCCL_OK(ncclAllReduce(arIn_, arOut_, arCount_, ncclFloat, ncclSum, comm_, stream_));
      NCCL_OK(ncclGroupStart());
      for (size_t p = 0; p < n_; ++p) {
        NCCL_OK(ncclSend(a2aIn_ + per_ * p, per_, ncclFloat, static_cast<int>(p), comm_, stream_));
        NCCL_OK(ncclRecv(a2aOut_ + per_ * p, per_, ncclFloat, static_cast<int>(p), comm_, stream_));
      }
      NCCL_OK(ncclGroupEnd());
      const bool decide = iter_ % kStopEvery == kStopEvery - 1;
      if (decide) {
        const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        *hostFlag_ = (opt_.rank == 0 && ran >= opt_.seconds) || stopRequested() ? 1 : 0;
        CUDA_OK(cudaMemcpyAsync(flag_, hostFlag_, sizeof(int), cudaMemcpyHostToDevice, stream_));
        NCCL_OK(ncclAllReduce(flag_, flag_, 1, ncclInt32, ncclMax, comm_, stream_));
        CUDA_OK(cudaMemcpyAsync(hostFlag_, flag_, sizeof(int), cudaMemcpyDeviceToHost, stream_));
      }
      sync();
      ++iter_;
      if (opt_.checkEvery > 0 && iter_ % static_cast<uint64_t>(opt_.checkEvery) == 0) check();
      if (decide && *hostFlag_) break;
    }
    check();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NCCL_OK(ncclCommDestroy(comm_));
    printf("DONE {\"t\":%.3f,\"rank\":%d,\"iters\":%llu,\"checks\":%llu,\"wrong\":%zu,\"s\":%.3f}\n", unixNow(),
           opt_.rank, static_cast<unsigned long long>(iter_), static_cast<unsigned long long>(checks_), wrong_, s);
    fflush(stdout);
    if (wrong_) {
      fprintf(stderr, "icn-straggler-driver: rank %d saw %zu wrong elements\n", opt_.rank, wrong_);
      return 1;
    }
    return 0;
  }

 private:
  ncclUniqueId rendezvous() {
    ncclUniqueId id;
    if (opt_.rank == 0) {
      NCCL_OK(ncclGetUniqueId(&id));
      const std::string tmp = opt_.idFile + ".tmp." + std::to_string(getpid());
      std::ofstream f(tmp, std::ios::binary);
      f.write(reinterpret_cast<const char*>(&id), sizeof(id));
      f.close();
      if (!f || rename(tmp.c_str(), opt_.idFile.c_str()) != 0) die("cannot write", opt_.idFile.c_str());
      return id;
    }
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      std::ifstream f(opt_.idFile, std::ios::binary);
      if (f && f.read(reinterpret_cast<char*>(&id), sizeof(id))) return id;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kRendezvousTimeoutS)
        die("no unique id from rank 0 in", opt_.idFile.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  bool stopRequested() const {
    struct stat st;
    return !opt_.stopFile.empty() && stat(opt_.stopFile.c_str(), &st) == 0;
  }

  // The delay file is read at most every 100 ms; the sleep itself happens every iteration.
  void sleepDelay() {
    if (opt_.delayFile.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= nextDelayRead_) {
      nextDelayRead_ = now + std::chrono::milliseconds(100);
      long us = 0;
      std::ifstream f(opt_.delayFile);
      if (f && !(f >> us)) us = 0;
      if (us < 0 || us > 10000000) us = 0;
      if (us != delayUs_) {
        printf("DELAY {\"t\":%.3f,\"rank\":%d,\"us\":%ld}\n", unixNow(), opt_.rank, us);
        fflush(stdout);
      }
      delayUs_ = us;
    }
    if (delayUs_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delayUs_));
  }

  void progress(std::chrono::steady_clock::time_point now) {
    if (now - lastPrint_ < std::chrono::milliseconds(opt_.progressMs)) return;
    const double dt = std::chrono::duration<double>(now - lastPrint_).count();
    printf("PROGRESS {\"t\":%.3f,\"rank\":%d,\"iter\":%llu,\"per_s\":%.1f}\n", unixNow(), opt_.rank,
           static_cast<unsigned long long>(iter_), static_cast<double>(iter_ - lastIter_) / dt);
    fflush(stdout);
    lastPrint_ = now;
    lastIter_ = iter_;
  }

  // Spins on the stream; NCCL's async error and the timeout are checked every ms, progress printed every -P ms.
  void sync() {
    auto t0 = std::chrono::steady_clock::now();
    auto nextCheck = t0;
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream_);
      auto now = std::chrono::steady_clock::now();
      if (e == cudaSuccess) {
        progress(now);
        return;
      }
      if (e != cudaErrorNotReady) die("cudaStreamQuery", cudaGetErrorString(e));
      if (now < nextCheck) continue;
      nextCheck = now + std::chrono::milliseconds(1);
      progress(now);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) die("NCCL async error", ncclGetErrorString(async));
      if (std::chrono::duration<double>(now - t0).count() > kSyncTimeoutS) die("a collective did not finish in time", nullptr);
    }
  }

  void check() {
    std::vector<float> ar(arCount_), a2a(per_ * n_);
    CUDA_OK(cudaMemcpyAsync(ar.data(), arOut_, ar.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    CUDA_OK(cudaMemcpyAsync(a2a.data(), a2aOut_, a2a.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    sync();
    const size_t r = static_cast<size_t>(opt_.rank);
    const double sumRanks = static_cast<double>(n_ * (n_ + 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < ar.size(); ++i) wrong += ar[i] != static_cast<float>(sumRanks + static_cast<double>(n_ * (i % 7)));
    for (size_t i = 0; i < a2a.size(); ++i) wrong += a2a[i] != static_cast<float>((i / per_) * n_ + r);
    ++checks_;
    if (wrong) {
      printf("WRONG {\"t\":%.3f,\"rank\":%d,\"iter\":%llu,\"wrong\":%zu}\n", unixNow(), opt_.rank,
             static_cast<unsigned long long>(iter_), wrong);
      fflush(stdout);
    }
    wrong_ += wrong;
  }

  Options opt_;
  size_t n_ = 0, arCount_ = 0, per_ = 0;
  float *arIn_ = nullptr, *arOut_ = nullptr, *a2aIn_ = nullptr, *a2aOut_ = nullptr;
  int* flag_ = nullptr;
  int* hostFlag_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_{};
  uint64_t iter_ = 0, lastIter_ = 0, checks_ = 0;
  size_t wrong_ = 0;
  long delayUs_ = 0;
  std::chrono::steady_clock::time_point lastPrint_, nextDelayRead_;
};

void usage() {
  fprintf(stderr,
          "usage: icn-straggler-driver -r RANK -N NRANKS -i IDFILE [-T 60] [-s 1M] [-a 1M] [-c 50] [-p PIDFILE] "
          "[-d DELAYFILE] [-x STOPFILE] [-P 1000]\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-' || strlen(argv[i]) != 2 || i + 1 >= argc) usage();
    const char* v = argv[++i];
    switch (argv[i - 1][1]) {
      case 'r': o.rank = parseInt(v, 0, 4095); break;
      case 'N': o.nranks = parseInt(v, 1, 4096); break;
      case 'i': o.idFile = v; break;
      case 'T': o.seconds = parseInt(v, 0, 86400); break;
      case 's': o.arBytes = parseSize(v); break;
      case 'a': o.a2aBytes = parseSize(v); break;
      case 'c': o.checkEvery = parseInt(v, 0, 1000000); break;
      case 'p': o.pidFile = v; break;
      case 'd': o.delayFile = v; break;
      case 'x': o.stopFile = v; break;
      case 'P': o.progressMs = parseInt(v, 10, 60000); break;
      default: usage();
    }
  }
  if (o.rank < 0 || o.rank >= o.nranks || o.idFile.empty()) usage();
  Driver d(std::move(o));
  d.init();
  return d.run();
}
