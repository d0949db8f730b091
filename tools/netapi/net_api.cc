#include "net_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

namespace icn::netapi {

namespace {
void stderrLogger(ncclDebugLogLevel level, unsigned long, const char* file, int line, const char* fmt, ...) {
  const char* env = getenv("NCCL_DEBUG");
  int threshold = env && !strcasecmp(env, "INFO") ? 3 : env && !strcasecmp(env, "TRACE") ? 5 : 2;
  if (static_cast<int>(level) > threshold) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* level_name = level == NCCL_LOG_WARN ? "WARN" : "INFO";
  if (getenv("NCCL_DEBUG_TIMESTAMP_LEVELS")) {  // as NCCL can: wall-clock time on each line, to the millisecond
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "[%d] %s [%lld.%03ld] %s\n", getpid(), level_name, static_cast<long long>(ts.tv_sec),
            ts.tv_nsec / 1'000'000, msg);
    return;
  }
  fprintf(stderr, "[%d] %s %s\n", getpid(), level_name, msg);
}
}  // namespace

bool Plugin::load(const std::string& path, std::string* err) {
  dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    *err = dlerror();
    return false;
  }
  net = static_cast<const ncclNet_v11_t*>(dlsym(dl, "ncclNetPlugin_v11"));
  if (!net) {
    *err = "ncclNetPlugin_v11 not exported by " + path;
    return false;
  }
  return true;
}

Plugin::~Plugin() {
  if (net && ctx) net->finalize(ctx);
  // Not dlclose'd: UCX keeps threads/handlers that must not outlive their code.
}

ncclResult_t Plugin::init(uint64_t commId) {
  ncclNetCommConfig_v11_t cfg{-1};
  return net->init(&ctx, commId, &cfg, stderrLogger, nullptr);
}

ncclResult_t connectBlocking(const Plugin& p, int dev, void* handle, void** sendComm, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  *sendComm = nullptr;
  ncclNetDeviceHandle_v11_t* devHandle = nullptr;
  while (!*sendComm) {
    ncclResult_t r = p.net->connect(p.ctx, dev, handle, sendComm, &devHandle);
    if (r != ncclSuccess) return r;
    if (*sendComm) break;
    if (Clock::now() > deadline) return ncclSystemError;
    std::this_thread::yield();
  }
  return ncclSuccess;
}

ncclResult_t acceptBlocking(const Plugin& p, void* listenComm, void** recvComm, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  *recvComm = nullptr;
  ncclNetDeviceHandle_v11_t* devHandle = nullptr;
  while (!*recvComm) {
    ncclResult_t r = p.net->accept(listenComm, recvComm, &devHandle);
    if (r != ncclSuccess) return r;
    if (*recvComm) break;
    if (Clock::now() > deadline) return ncclSystemError;
    std::this_thread::yield();
  }
  return ncclSuccess;
}

ncclResult_t waitRequest(const Plugin& p, void* request, int* sizes, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  int done = 0;
  for (;;) {
    ncclResult_t r = p.net->test(request, &done, sizes);
    if (r != ncclSuccess) return r;
    if (done) return ncclSuccess;
    if (Clock::now() > deadline) return ncclSystemError;
  }
}

Pipe::~Pipe() {
  if (fd_ >= 0) close(fd_);
}

Pipe& Pipe::operator=(Pipe&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

bool Pipe::send(const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len) {
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool Pipe::recv(void* data, size_t len, std::chrono::milliseconds limit) {
  char* p = static_cast<char*>(data);
  auto deadline = Clock::now() + limit;
  while (len) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pf{fd_, POLLIN, 0};
    int r = ::poll(&pf, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::recv(fd_, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

static inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

void fillPattern(void* buf, size_t len, uint64_t seed) {
  auto* b = static_cast<uint8_t*>(buf);
  size_t words = len / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t v = mix(seed * 0x9e3779b97f4a7c15ULL + i);
    memcpy(b + 8 * i, &v, 8);
  }
  uint64_t tail = mix(seed * 0x9e3779b97f4a7c15ULL + words);
  for (size_t i = words * 8; i < len; i++) b[i] = static_cast<uint8_t>(tail >> (8 * (i % 8)));
}

size_t checkPattern(const void* buf, size_t len, uint64_t seed) {
  const auto* b = static_cast<const uint8_t*>(buf);
  size_t words = len / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t v = mix(seed * 0x9e3779b97f4a7c15ULL + i), got;
    memcpy(&got, b + 8 * i, 8);
    if (got != v) {
      for (size_t k = 0; k < 8; k++)
        if (b[8 * i + k] != static_cast<uint8_t>(v >> (8 * k))) return 8 * i + k;
    }
  }
  uint64_t tail = mix(seed * 0x9e3779b97f4a7c15ULL + words);
  for (size_t i = words * 8; i < len; i++)
    if (b[i] != static_cast<uint8_t>(tail >> (8 * (i % 8)))) return i;
  return SIZE_MAX;
}

}  // namespace icn::netapi
