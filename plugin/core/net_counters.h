// Per-connection byte/message counters: the only thing transports tell the telemetry layer.
// Each comm owns its counters (no sharing, relaxed atomics), the registry lets the heatmap
// enumerate them while the job runs.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace icn {

struct NetCommInfo {
  uint64_t commId = 0;    // NCCL communicator id (0 when unknown: net API v9/v10)
  int localRank = -1;     // our rank in that communicator when the profiler told us, else -1
  int peerRank = -1;      // the peer's rank, learnt in the handshake, else -1
  std::string peer;       // peer host:pid (always known)
  int channel = 0;        // n-th connection between the same two ranks of this communicator
  bool isSend = true;
};

struct NetCounters {
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> messages{0};
  void add(uint64_t b) {
    bytes.fetch_add(b, std::memory_order_relaxed);
    messages.fetch_add(1, std::memory_order_relaxed);
  }
};

// Per rail, summed over connections: a local interface that ICN's TCP transport spreads helper sockets over, or a
// device port a verbs connection uses (one of its links).
enum class RailKind { Tcp, Ib };
struct RailCounters {
  std::atomic<uint64_t> bytes{0};    // sent on the rail (TCP: on its helper sockets; resent pieces included)
  std::atomic<uint64_t> givenUp{0};  // TCP: helper sockets given up; verbs: links lost (failover)
  std::atomic<uint64_t> back{0};     // given up, then carrying data again (re-admitted)
};
struct RailSample {
  std::string ifname;  // TCP: the interface; verbs: "device:port"
  RailKind kind;
  uint64_t bytes, givenUp, back;
};

struct NetCommSample {
  NetCommInfo info;
  uint64_t bytes;
  uint64_t messages;
  bool closed;
};

namespace netstats {
// Registers a new connection; the channel field is assigned here (per commId/peer/direction ordinal).
std::shared_ptr<NetCounters> registerComm(NetCommInfo& info);
void unregisterComm(const std::shared_ptr<NetCounters>& counters);
std::vector<NetCommSample> snapshot();
// The counters of one interface (created on first use, kept for the process; at most 64 interfaces, then null).
std::shared_ptr<RailCounters> railCounters(const std::string& ifname, RailKind kind = RailKind::Tcp);
std::vector<RailSample> railSnapshot();
// The profiler learns our rank per communicator; the handshake sends it to the peer.
void setLocalRank(uint64_t commId, int rank);
int localRank(uint64_t commId);
void resetForTesting();
}  // namespace netstats

}  // namespace icn
