// Plays an application (or torchrun worker) calling NCCL; linked against the stand-in NCCL, run with or
// without LD_PRELOAD=libicn-shim.so. Prints "APP ok" lines the test checks for argument forwarding.
#include <unistd.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
struct UniqueId {
  char internal[128];
};
int ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank);
int ncclCommInitRankConfig(void** comm, int nranks, UniqueId id, int rank, void* config);
int ncclCommInitAll(void** comm, int ndev, const int* devlist);
int ncclCommInitRankScalable(void** comm, int nranks, int myrank, int nId, UniqueId* ids, void* config);
}

static UniqueId makeId(int seed) {
  UniqueId id;
  memset(&id, 0, sizeof id);
  id.internal[0] = static_cast<char>(seed);
  id.internal[127] = 0x5a;  // last byte: proves the 128-byte struct crossed by value intact
  return id;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "rank";
  int bad = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      printf("APP mismatch %s\n", what);
      bad++;
    }
  };
  if (mode == "rank" || mode == "all4") {
    void* c = nullptr;
    check(ncclCommInitRank(&c, 8, makeId(7), 3) == 0 && c == reinterpret_cast<void*>(0x1003), "InitRank");
  }
  if (mode == "all4") {
    void* c = nullptr;
    int cfg = 42;
    check(ncclCommInitRankConfig(&c, 4, makeId(9), 2, &cfg) == 0 && c == reinterpret_cast<void*>(0x2002), "Config");
    void* cs[3] = {};
    int devs[3] = {5, 6, 7};
    check(ncclCommInitAll(cs, 3, devs) == 0 && cs[2] == reinterpret_cast<void*>(0x3007), "InitAll");
    UniqueId ids[2] = {makeId(11), makeId(12)};
    check(ncclCommInitRankScalable(&c, 16, 5, 2, ids, &cfg) == 0 && c == reinterpret_cast<void*>(0x4005), "Scalable");
  }
  if (mode == "threads") {
    std::vector<std::thread> ts;
    std::vector<void*> comms(8);
    for (int r = 0; r < 8; r++)
      ts.emplace_back([&, r] { ncclCommInitRank(&comms[r], 8, makeId(r), r); });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 8; r++) check(comms[r] == reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + r)), "thread");
  }
  if (mode == "exec-child") {  // a worker that initialises, then starts a child process (inherits our env)
    void* c = nullptr;
    ncclCommInitRank(&c, 2, makeId(1), 0);
    pid_t pid = fork();
    if (pid == 0) {
      execl(argv[0], argv[0], "rank", static_cast<char*>(nullptr));
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
  }
  printf("APP %s\n", bad ? "failed" : "ok");
  return bad ? 1 : 0;
}
