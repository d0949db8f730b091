// Minimal NCCL client for test/device/nccl_versions.sh: dlopens the libnccl.so given on the command line (so one
// binary serves every NCCL build), creates a communicator and runs one float all-reduce.
//   nccl_init LIBNCCL 1                   single rank
//   nccl_init LIBNCCL 2 RANK IDFILE       one of two processes; rank 0 writes the unique id, rank 1 reads it
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {
struct UniqueId {
  char internal[128];
};
using GetVersion = int (*)(int*);
using GetUniqueId = int (*)(UniqueId*);
using InitRank = int (*)(void**, int, UniqueId, int);
using AllReduce = int (*)(const void*, void*, size_t, int, int, void*, cudaStream_t);
using Destroy = int (*)(void*);

int fail(const char* what, int rc) {
  fprintf(stderr, "nccl_init: %s failed (%d)\n", what, rc);
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage", 2);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return fail(dlerror(), 2);
  auto version = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
  auto uniqueId = reinterpret_cast<GetUniqueId>(dlsym(lib, "ncclGetUniqueId"));
  auto initRank = reinterpret_cast<InitRank>(dlsym(lib, "ncclCommInitRank"));
  auto allReduce = reinterpret_cast<AllReduce>(dlsym(lib, "ncclAllReduce"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "ncclCommDestroy"));
  if (!version || !uniqueId || !initRank || !allReduce || !destroy) return fail("dlsym", 2);
  int v = 0;
  version(&v);
  int nranks = atoi(argv[2]), rank = argc > 3 ? atoi(argv[3]) : 0;
  const char* idFile = argc > 4 ? argv[4] : nullptr;
  printf("nccl_init: NCCL version code %d, rank %d/%d\n", v, rank, nranks);
  UniqueId id{};
  if (rank == 0) {
    if (int rc = uniqueId(&id)) return fail("ncclGetUniqueId", rc);
    if (idFile) {
      std::string tmp = std::string(idFile) + ".tmp";
      FILE* f = fopen(tmp.c_str(), "wb");
      if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), idFile) != 0)
        return fail("write id", 2);
    }
  } else {
    for (int i = 0; i < 300; i++) {  // 30 s
      FILE* f = fopen(idFile, "rb");
      if (f) {
        bool ok = fread(&id, sizeof id, 1, f) == 1;
        fclose(f);
        if (ok) break;
      }
      usleep(100000);
    }
  }
  if (cudaSetDevice(0) != cudaSuccess) return fail("cudaSetDevice", 2);
  void* comm = nullptr;
  if (int rc = initRank(&comm, nranks, id, rank)) return fail("ncclCommInitRank", rc);
  const size_t n = 1 << 20;
  float* buf = nullptr;
  if (cudaMalloc(&buf, n * sizeof(float)) != cudaSuccess) return fail("cudaMalloc", 2);
  cudaMemset(buf, 0, n * sizeof(float));
  for (int i = 0; i < 3; i++)
    if (int rc = allReduce(buf, buf, n, /*ncclFloat32*/ 7, /*ncclSum*/ 0, comm, nullptr)) return fail("ncclAllReduce", rc);
  if (cudaDeviceSynchronize() != cudaSuccess) return fail("cudaDeviceSynchronize", 2);
  cudaFree(buf);
  if (int rc = destroy(comm)) return fail("ncclCommDestroy", rc);
  printf("nccl_init: rank %d done\n", rank);
  return 0;
}
