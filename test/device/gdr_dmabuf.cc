// GPU half of GPUDirect RDMA on a machine without an RDMA NIC: can the driver export GPU memory as a dma-buf
// (what ICN's ib transport registers with ibv_reg_dmabuf_mr), and is nvidia_peermem loaded?
//   g++ -O2 gdr_dmabuf.cc -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o gdr_dmabuf
#include <cuda.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

int main() {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuCtxCreate(&ctx, nullptr, 0, dev) != CUDA_SUCCESS) {
    printf("gdr: no CUDA device\n");
    return 1;
  }
  int dmabuf = 0;
  cuDeviceGetAttribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
  printf("gdr: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED=%d\n", dmabuf);
  const size_t size = 2 << 20;  // one 2 MiB page: dma-buf export wants page-aligned ranges
  CUdeviceptr p = 0;
  if (cuMemAlloc(&p, size) != CUDA_SUCCESS) return 1;
  int fd = -1;
  CUresult r = cuMemGetHandleForAddressRange(&fd, p, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  const char* err = nullptr;
  cuGetErrorString(r, &err);
  printf("gdr: cuMemGetHandleForAddressRange(2 MiB, DMA_BUF_FD) = %d (%s), fd %d\n", static_cast<int>(r),
         err ? err : "?", fd);
  if (fd >= 0) {
    struct stat st{};
    fstat(fd, &st);
    printf("gdr: dma-buf fd size %lld bytes\n", static_cast<long long>(st.st_size));
    close(fd);
  }
  struct stat st{};
  bool peermem = stat("/sys/module/nvidia_peermem", &st) == 0 || stat("/sys/module/nv_peer_mem", &st) == 0;
  printf("gdr: nvidia_peermem loaded: %s\n", peermem ? "yes" : "no");
  cuMemFree(p);
  cuCtxDestroy(ctx);
  return 0;
}
