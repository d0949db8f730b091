// The one small interface every transport implements. No NCCL types: adapters translate.
//
// Ownership: comms are created as unique_ptr and handed to NCCL as raw pointers by the adapter
// (release()); NCCL gives them back at close. Requests live in per-comm pools: a request belongs
// to the caller from isend/irecv/iflush until test() reports it done, then returns to its pool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace icn {

constexpr size_t kHandleSize = 128;       // NCCL_NET_HANDLE_MAXSIZE
constexpr int kMaxRecvs = 8;              // grouped receives per irecv
constexpr int kMaxRequests = 32;          // in flight per comm (x kMaxRecvs on the send side)
constexpr int kMaxVDevMembers = 4;        // NCCL_NET_MAX_DEVS_PER_NIC

// Memory kinds, numerically equal to NCCL_PTR_* so adapters pass them straight through (asserted there).
enum MemType : int { kMemHost = 1, kMemCuda = 2, kMemDmabuf = 4 };

using HandleBytes = std::span<uint8_t, kHandleSize>;

struct DeviceProps {
  std::string name;
  std::string pciPath;  // /sys/devices/... of the NIC; empty when there is none (loopback)
  uint64_t guid = 0;
  int ptrSupport = kMemHost;
  bool regIsGlobal = false;
  bool forceFlush = false;
  int speedMbps = 0;
  int port = 1;
  float latencyUs = 0.f;
  int maxComms = 65536;
  int maxRecvs = kMaxRecvs;
  size_t maxP2pBytes = size_t{1} << 31;
  size_t maxCollBytes = size_t{1} << 31;
  std::vector<int> members;  // physical devices behind a virtual device (one entry for a physical one)
  int rails = 1;             // separate links one connection of the device stripes over (NCCL sees one NIC)
};

struct CommConfig {
  uint64_t commId = 0;
  int trafficClass = -1;  // -1: undefined
};

class Request {
 public:
  virtual ~Request() = default;
  // sizes may be null; otherwise receives one entry per grouped receive (bytes actually received).
  virtual Status test(bool* done, int* sizes) = 0;
};

// Common to send and receive comms: memory registration.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual Status regMr(void* data, size_t size, int type, void** mhandle) = 0;
  virtual Status regMrDmaBuf(void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) = 0;
  virtual Status deregMr(void* mhandle) = 0;
};

class SendComm : public Comm {
 public:
  // *request == nullptr with Ok means "try again later" (NCCL retries): the answer when all
  // kMaxRequests * kMaxRecvs send requests are in flight (or the transport must wait for the receiver).
  virtual Status isend(void* data, size_t size, int tag, void* mhandle, Request** request) = 0;
};

class RecvComm : public Comm {
 public:
  // More than kMaxRequests receives in flight is InvalidUsage: NCCL never posts more (NCCL_NET_MAX_REQUESTS).
  virtual Status irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                       Request** request) = 0;
  // *request == nullptr: nothing to flush.
  virtual Status iflush(int n, void** data, const int* sizes, void** mhandles, Request** request) = 0;
};

class ListenComm {
 public:
  virtual ~ListenComm() = default;
  // Non-blocking: Ok with *out == nullptr until a peer has completed its handshake.
  virtual Status accept(std::unique_ptr<RecvComm>* out) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int deviceCount() const = 0;
  virtual Status getProperties(int dev, DeviceProps* out) const = 0;
  // Fills the 128-byte handle that NCCL ships to the peer.
  virtual Status listen(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<ListenComm>* out) = 0;
  // Non-blocking: called repeatedly with the same handle buffer (the transport may keep state in it)
  // until *out is non-null.
  virtual Status connect(int dev, const CommConfig& config, HandleBytes handle, std::unique_ptr<SendComm>* out) = 0;
  // Returns once connections closed earlier have delivered what was sent on them (bounded); closes
  // themselves never wait for the peer.
  virtual void quiesce() {}
  // Fuses physical devices into a virtual one appended after the existing devices.
  virtual Status makeVDevice(std::span<const int> members, int* newDev) { return Status::InvalidUsage; }
};

}  // namespace icn
