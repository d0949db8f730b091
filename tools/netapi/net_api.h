// Drives a net plugin .so through ncclNetPlugin_v11 the way NCCL's proxy thread does: dlopen,
// non-blocking connect/accept loops, request testing. Used by icn-perf and the conformance suite.
// Every wait has a deadline.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "abi/net_v11.h"

namespace icn::netapi {

class Plugin {
 public:
  // Loads path (or "libnccl-net-icn.so" through the loader path) and resolves ncclNetPlugin_v11.
  bool load(const std::string& path, std::string* err);
  ~Plugin();
  const ncclNet_v11_t* net = nullptr;
  void* ctx = nullptr;  // from init
  void* dl = nullptr;
  // init + devices; commId as NCCL would pass.
  ncclResult_t init(uint64_t commId = 0x1234);
};

using Clock = std::chrono::steady_clock;

// Loops connect()/accept() until a comm appears, an error is returned, or the deadline passes.
ncclResult_t connectBlocking(const Plugin& p, int dev, void* handle, void** sendComm, std::chrono::milliseconds limit);
ncclResult_t acceptBlocking(const Plugin& p, void* listenComm, void** recvComm, std::chrono::milliseconds limit);
// Tests until done; returns the test() error, or ncclSystemError on timeout. sizes may be null.
ncclResult_t waitRequest(const Plugin& p, void* request, int* sizes, std::chrono::milliseconds limit);

// A byte exchange between two processes (socketpair or TCP) to pass handles and barriers.
class Pipe {
 public:
  explicit Pipe(int fd = -1) : fd_(fd) {}
  ~Pipe();
  Pipe(Pipe&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Pipe& operator=(Pipe&& o) noexcept;
  bool send(const void* data, size_t len);
  bool recv(void* data, size_t len, std::chrono::milliseconds limit = std::chrono::milliseconds(60000));
  bool barrier() {
    char b = 'b';
    return send(&b, 1) && recv(&b, 1);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Fills buf with a pattern that depends on (seed, offset) so misplaced or stale bytes are detected.
void fillPattern(void* buf, size_t len, uint64_t seed);
// Returns the first mismatching offset, or SIZE_MAX when buf holds the pattern.
size_t checkPattern(const void* buf, size_t len, uint64_t seed);

}  // namespace icn::netapi
