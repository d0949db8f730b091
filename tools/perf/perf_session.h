// One rank of an icn-perf run: a send and a receive comm to the peer, and the measurement loops.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "net_api.h"

namespace icn::perf {

struct Options {
  std::string plugin;
  size_t minBytes = 8, maxBytes = 64u << 20;
  int window = 32;        // requests in flight for bandwidth (NCCL allows 32)
  int latIters = 1000;    // ping-pongs per size (fewer for large sizes)
  double bwBytes = 512e6; // bytes moved per bandwidth point
  bool bw = true, lat = true;
  // Exchange mode (--exchange): NCCL's point-to-point pattern. Both ranks send and receive at once over
  // `conns` connections per direction, `window` requests in flight on each, every request tested oldest
  // first and at most one post and one test per connection and direction in each pass (as NCCL's proxy).
  bool exchange = false;
  int conns = 1;
  int64_t sliceUs = 0;  // exchange mode: emulate two processes time-sharing one GPU in turns of this length
  std::string json;
};

struct Point {
  size_t bytes;
  double gbps = 0;   // unidirectional bandwidth, GB/s (1e9); in exchange mode, per direction
  double msgUs = 0;  // exchange mode: mean time per message and direction (all connections together), µs
  double cpuUs = 0;  // exchange mode: CPU time of both processes per message and direction, µs
  double p50us = 0, p99us = 0, minus = 0;
};

class Session {
 public:
  Session(int rank, netapi::Plugin& p, netapi::Pipe& peer, const Options& o) : rank_(rank), p_(p), peer_(peer), o_(o) {}
  bool connect(std::string* err);
  bool run(std::vector<Point>* out, std::string* err);
  void close();

 private:
  bool bandwidth(size_t bytes, double* gbps, std::string* err);
  bool exchange(size_t bytes, Point* pt, std::string* err);
  bool latency(size_t bytes, Point* pt, std::string* err);
  bool send(void* buf, size_t n, void* mh, std::string* err);
  bool recv(void* buf, size_t n, void* mh, std::string* err);

  int rank_;
  netapi::Plugin& p_;
  netapi::Pipe& peer_;
  const Options& o_;
  void *listen_ = nullptr, *send_ = nullptr, *recv_ = nullptr;
  // Exchange mode's further connections (the first pair is send_/recv_).
  std::vector<void*> listens_, sends_, recvs_, smhs_, rmhs_;
  std::vector<uint8_t> sbuf_, rbuf_;
  void *smh_ = nullptr, *rmh_ = nullptr;
};

}  // namespace icn::perf
