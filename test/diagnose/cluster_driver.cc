// One rank of an NCCL-shaped job without a GPU, for the straggler and hang cases across emulated hosts
// (test/diagnose/cluster_cases.sh): it drives the plugin as NCCL's proxy does (net API v11, with the profiler's and
// the tuner's init announcing its rank and joining the communicator's processes), and per iteration exchanges one
// message with every other rank (an all-to-all), host memory, every byte checked. With --channels C, C connections
// to each peer each way, and an iteration runs the all-to-all over each channel in turn, one after the other, as
// NCCL's collectives move through their steps: a channel waits for the one before it; with --together 1 every
// channel's messages are posted at once and waited for together, as NCCL's channels move side by side. With
// --rare K (K > 1, two or more channels) the last channel moves only every K-th iteration, as the connections of an
// occasional small collective do (NCCL's tree of a loss or flag all_reduce beside the ring of the gradients); while
// DIR/hold-rare exists it does not move at all (rank 0 decides each iteration whether the next one moves it, and tells
// the others in its messages, so every rank agrees).
//
//   icn-diag-cluster-driver --rank R --nranks N --dir DIR [--bytes B] [--seconds S] [--plugin PATH] [--tick-ms T]
//                           [--channels C] [--together 0|1] [--rare K]
//
// DIR is shared by all ranks: handles (handle.<to>.<from>.<channel>), this rank's pid (pid.<R>), and the controls
// the cases write: delay.<R> (microseconds this rank sleeps before each iteration) and stop (rank 0 ends the run; S
// seconds also end it). Rank 0's messages carry whether the run goes on, so every rank ends at the same iteration.
// Prints PROGRESS every second and DONE {"rank":R,"iters":n,"wrong":w} at the end; exit 0 when every byte was
// right and every call succeeded.
#include <dlfcn.h>
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

#include "abi/profiler_v5.h"
#include "abi/tuner_v5.h"
#include "net_api.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kCommId = 0xd1a9c0de;
constexpr int kTag = 7;
constexpr auto kOpLimit = std::chrono::seconds(120);  // longer than any injected stall

struct Header {
  uint64_t iter;
  uint64_t goOn;      // rank 0's messages: 1 while the run goes on
  uint64_t rareNext;  // rank 0's messages: 1 when the next iteration moves the rare channel
};

struct Options {
  int rank = -1, nranks = 0;
  std::string dir, plugin;
  size_t bytes = 256 * 1024;
  int seconds = 60;
  int tickMs = 0;  // > 0: a TICK line (wall-clock ms, iterations) this often, for stall measurements
  int channels = 1;
  bool together = false;  // every channel's messages in flight at once
  int rare = 0;           // > 1: the last channel moves only every rare-th iteration
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank") o->rank = atoi(v.c_str());
    else if (k == "--nranks") o->nranks = atoi(v.c_str());
    else if (k == "--dir") o->dir = v;
    else if (k == "--bytes") o->bytes = strtoull(v.c_str(), nullptr, 10);
    else if (k == "--seconds") o->seconds = atoi(v.c_str());
    else if (k == "--tick-ms") o->tickMs = atoi(v.c_str());
    else if (k == "--plugin") o->plugin = v;
    else if (k == "--channels") o->channels = atoi(v.c_str());
    else if (k == "--together") o->together = v == "1";
    else if (k == "--rare") o->rare = atoi(v.c_str());
    else return false;
  }
  return o->nranks >= 2 && o->rank >= 0 && o->rank < o->nranks && !o->dir.empty() && o->bytes >= sizeof(Header) &&
         o->bytes <= (64u << 20) && o->seconds > 0 && o->channels >= 1 && o->channels <= 16 && o->rare >= 0 &&
         (o->rare <= 1 || o->channels >= 2);
}

bool writeFile(const std::string& path, const void* data, size_t len) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  return ok && rename(tmp.c_str(), path.c_str()) == 0;
}

bool readFile(const std::string& path, void* data, size_t len) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  bool ok = fread(data, 1, len, f) == len;
  fclose(f);
  return ok;
}

long delayUs(const std::string& dir, int rank) {
  std::ifstream in(dir + "/delay." + std::to_string(rank));
  long us = 0;
  return in >> us && us > 0 && us < 10000000 ? us : 0;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// What NCCL does at communicator init when the net plugin also serves as profiler and tuner.
void* joinAsNccl(icn::netapi::Plugin& p, const Options& o) {
  if (auto* prof = static_cast<const ncclProfiler_v5_t*>(dlsym(p.dl, "ncclProfiler_v5"))) {
    void* ctx = nullptr;
    int mask = 0;
    if (prof->init(&ctx, kCommId, &mask, "cluster", o.nranks, o.nranks, o.rank, nullptr) != ncclSuccess)
      fprintf(stderr, "profiler init failed\n");
  }
  auto* tuner = static_cast<const ncclTuner_v5_t*>(dlsym(p.dl, "ncclTunerPlugin_v5"));
  if (!tuner) return nullptr;
  void* ctx = nullptr;
  ncclNvlDomainInfo_v5_t nvl{o.nranks, 1, 1};
  ncclTunerConstants_v5_t constants{};
  if (tuner->init(&ctx, kCommId, o.nranks, o.nranks, nullptr, &nvl, &constants) != ncclSuccess) return nullptr;
  return ctx;
}

// One listen comm per peer and channel (handle.<me>.<peer>.<channel>), so each accepted comm is known to come from
// that peer's channel; then connects and accepts are driven together, as NCCL's proxy does, until every comm exists.
// Comms are indexed peer * channels + channel.
bool connectAll(icn::netapi::Plugin& p, const Options& o, std::vector<void*>* send, std::vector<void*>* recv) {
  const int n = o.nranks, me = o.rank, ch = o.channels;
  auto name = [&](int to, int from, int c) {
    return o.dir + "/handle." + std::to_string(to) + "." + std::to_string(from) + "." + std::to_string(c);
  };
  std::vector<void*> listen(static_cast<size_t>(n * ch), nullptr);
  for (int peer = 0; peer < n; peer++) {
    for (int c = 0; c < ch && peer != me; c++) {
      char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
      if (p.net->listen(p.ctx, 0, handle, &listen[peer * ch + c]) != ncclSuccess) return false;
      if (!writeFile(name(me, peer, c), handle, sizeof handle)) return false;
    }
  }
  send->assign(static_cast<size_t>(n * ch), nullptr);
  recv->assign(static_cast<size_t>(n * ch), nullptr);
  std::vector<std::vector<char>> handles(static_cast<size_t>(n * ch));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  int missing = 2 * (n - 1) * ch;
  while (missing > 0) {
    if (Clock::now() > deadline) return false;
    for (int peer = 0; peer < n; peer++) {
      for (int c = 0; c < ch && peer != me; c++) {
        const int k = peer * ch + c;
        if (!(*send)[k]) {
          if (handles[k].empty()) {
            std::vector<char> h(NCCL_NET_HANDLE_MAXSIZE);
            if (readFile(name(peer, me, c), h.data(), h.size())) handles[k] = h;
          }
          ncclNetDeviceHandle_v11_t* dh = nullptr;
          if (!handles[k].empty()) {
            if (p.net->connect(p.ctx, 0, handles[k].data(), &(*send)[k], &dh) != ncclSuccess) return false;
            if ((*send)[k]) missing--;
          }
        }
        if (!(*recv)[k]) {
          ncclNetDeviceHandle_v11_t* dh = nullptr;
          if (p.net->accept(listen[k], &(*recv)[k], &dh) != ncclSuccess) return false;
          if ((*recv)[k]) missing--;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (void* l : listen)
    if (l) p.net->closeListen(l);
  return true;
}

// Tests every pending request in turn until all are done, as NCCL's proxy does: a transport may move one
// connection's bytes only when one of its requests is tested.
bool waitAll(icn::netapi::Plugin& p, std::vector<void*>* reqs) {
  const auto limit = Clock::now() + kOpLimit;
  size_t left = reqs->size();
  while (left > 0) {
    for (void*& r : *reqs) {
      if (!r) continue;
      int done = 0, size = 0;
      if (const ncclResult_t rc = p.net->test(r, &done, &size); rc != ncclSuccess) {
        fprintf(stderr, "test() returned NCCL error %d\n", static_cast<int>(rc));
        return false;
      }
      if (done) {
        r = nullptr;
        left--;
      }
    }
    if (Clock::now() > limit) {
      fprintf(stderr, "%zu request(s) not done within %lld s\n", left,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kOpLimit).count()));
      return false;
    }
  }
  return true;
}

uint64_t seedOf(uint64_t iter, int from, int to) { return iter * 1000003u + static_cast<uint64_t>(from) * 1009u + to; }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s --rank R --nranks N --dir DIR [--bytes B] [--seconds S] [--plugin PATH] [--tick-ms T] "
            "[--channels C] [--together 0|1] [--rare K]\n",
            argv[0]);
    return 2;
  }
  const std::string pidText = std::to_string(getpid());
  writeFile(o.dir + "/pid." + std::to_string(o.rank), pidText.data(), pidText.size());
  icn::netapi::Plugin p;
  std::string err;
  if (!p.load(o.plugin.empty() ? "libnccl-net-icn.so" : o.plugin, &err) || p.init(kCommId) != ncclSuccess) {
    fprintf(stderr, "rank %d: cannot load or init the plugin: %s\n", o.rank, err.c_str());
    return 1;
  }
  void* tuner = joinAsNccl(p, o);
  std::vector<void*> send, recv;
  if (!connectAll(p, o, &send, &recv)) {
    fprintf(stderr, "rank %d: connecting to every peer failed\n", o.rank);
    return 1;
  }
  const int n = o.nranks, ch = o.channels;
  // Buffers per peer and channel (index peer * channels + channel): with --together they are all in flight at once.
  std::vector<std::vector<char>> out(n * ch, std::vector<char>(o.bytes)), in(n * ch, std::vector<char>(o.bytes));
  const auto start = Clock::now(), end = start + std::chrono::seconds(o.seconds);
  auto nextPrint = start + std::chrono::seconds(1);
  auto nextTick = start;
  uint64_t iter = 0, wrong = 0;
  bool goOn = true, failed = false;
  bool rareNow = true, rareNext = true;  // whether this iteration and the next move the rare channel (--rare)
  // Channels [first, last) of one step: every channel alone in turn, or all of them at once.
  const int step = o.together ? ch : 1;
  while (goOn && !failed) {
    if (long us = delayUs(o.dir, o.rank)) std::this_thread::sleep_for(std::chrono::microseconds(us));
    const bool mine = o.rank != 0 || (Clock::now() < end && !exists(o.dir + "/stop"));
    if (o.rank == 0 && o.rare > 1)
      rareNext = (iter + 1) % static_cast<uint64_t>(o.rare) == 0 && !exists(o.dir + "/hold-rare");
    const int used = o.rare > 1 && !rareNow ? ch - 1 : ch;  // the rare one sits out
    for (int first = 0; first < used && !failed; first += step) {
      const int last = std::min(first + step, used);
      std::vector<void*> reqs;
      for (int c = first; c < last; c++) {
        for (int peer = 0; peer < n && !failed; peer++) {
          if (peer == o.rank) continue;
          void* d = in[peer * ch + c].data();
          size_t sz = o.bytes;
          int tag = kTag;
          void* r = nullptr;
          const auto limit = Clock::now() + kOpLimit;
          while (!r && !failed) {  // a null request without an error: no room yet, NCCL asks again
            failed = p.net->irecv(recv[peer * ch + c], 1, &d, &sz, &tag, nullptr, nullptr, &r) != ncclSuccess ||
                     Clock::now() > limit;
          }
          reqs.push_back(r);
        }
      }
      for (int c = first; c < last; c++) {
        for (int peer = 0; peer < n && !failed; peer++) {
          if (peer == o.rank) continue;
          std::vector<char>& buf = out[peer * ch + c];
          icn::netapi::fillPattern(buf.data(), o.bytes, seedOf(iter, o.rank, peer));
          Header h{iter, mine ? 1u : 0u, rareNext ? 1u : 0u};
          memcpy(buf.data(), &h, sizeof h);
          void* r = nullptr;
          const auto limit = Clock::now() + kOpLimit;
          while (!r && !failed) {
            failed = p.net->isend(send[peer * ch + c], buf.data(), o.bytes, kTag, nullptr, nullptr, &r) !=
                         ncclSuccess ||
                     Clock::now() > limit;
          }
          reqs.push_back(r);
        }
      }
      if (!failed && !waitAll(p, &reqs)) {
        fprintf(stderr, "rank %d: iteration %llu did not complete\n", o.rank, static_cast<unsigned long long>(iter));
        failed = true;
      }
      if (failed) break;
      std::vector<char> expect(o.bytes);
      for (int c = first; c < last; c++) {
        for (int peer = 0; peer < n; peer++) {  // every channel's messages checked as they arrive
          if (peer == o.rank) continue;
          const std::vector<char>& got = in[peer * ch + c];
          Header h;
          memcpy(&h, got.data(), sizeof h);
          icn::netapi::fillPattern(expect.data(), o.bytes, seedOf(iter, peer, o.rank));
          if (h.iter != iter || memcmp(expect.data() + sizeof h, got.data() + sizeof h, o.bytes - sizeof h) != 0)
            wrong++;
          if (peer == 0) {
            goOn = h.goOn == 1;
            rareNext = h.rareNext == 1;
          }
        }
      }
    }
    if (failed) break;
    if (o.rank == 0) goOn = mine;
    rareNow = rareNext;
    iter++;
    if (o.tickMs > 0 && Clock::now() >= nextTick) {
      const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
      printf("TICK {\"t\":%lld,\"iters\":%llu}\n", ms, static_cast<unsigned long long>(iter));
      nextTick = Clock::now() + std::chrono::milliseconds(o.tickMs);
    }
    if (Clock::now() >= nextPrint) {
      printf("PROGRESS {\"rank\":%d,\"iters\":%llu}\n", o.rank, static_cast<unsigned long long>(iter));
      fflush(stdout);
      nextPrint += std::chrono::seconds(1);
    }
  }
  for (size_t k = 0; k < send.size(); k++) {
    if (send[k]) p.net->closeSend(send[k]);
    if (recv[k]) p.net->closeRecv(recv[k]);
  }
  if (auto* t = static_cast<const ncclTuner_v5_t*>(dlsym(p.dl, "ncclTunerPlugin_v5")); t && tuner) t->finalize(tuner);
  printf("DONE {\"rank\":%d,\"iters\":%llu,\"wrong\":%llu,\"failed\":%d}\n", o.rank,
         static_cast<unsigned long long>(iter), static_cast<unsigned long long>(wrong), failed ? 1 : 0);
  fflush(stdout);
  return failed || wrong ? 1 : 0;
}
