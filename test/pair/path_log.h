// Which transport and which path each send connection used, read from a rank's log (NCCL_DEBUG=INFO): the
// "TCP|UCX connection to ... closed: N messages sent, ..." line each send comm writes when it closes, summed
// over the rank's send connections, and the thresholds the transport logged at set-up.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace icn::testpair {

struct SendPaths {
  std::string transport;  // "tcp", "ucx" or "" (no close line found)
  int connections = 0;    // send connections that logged their close
  uint64_t messages = 0;
  // ICN's TCP transport: eager (small, before the clear-to-send), early (large, before the clear-to-send, whole
  // on a helper lane), whole on lane 0, over the helper lanes.
  uint64_t eager = 0, early = 0, lane0 = 0, split = 0;
  size_t eagerMax = 0;    // eager messages are <= this
  size_t earlyMax = 0;    // early messages are <= this
  int earlyLanesUsed = 0;     // the most helper lanes that held early messages at once (any connection)
  int earlyLanesAllowed = 0;  // how many may
  size_t lane0Max = 0;    // larger messages are split ("messages <= N bytes on lane 0"); 0 when not logged
  // UCX: messages on either side of UCX's rendezvous threshold.
  uint64_t belowRndv = 0, fromRndv = 0;
  size_t rndvFrom = 0;
  std::string lanes;      // UCX lanes of the first send connection ("tcp/eth0", "cma/memory, posix/memory")
};

SendPaths sendPaths(const std::string& log);
std::string describe(const SendPaths& p);
// UCX: "" when the lanes match what UCX_TLS asks for (tcp: tcp lanes; posix: shared-memory lanes), else why not.
std::string lanesAgainstUcxTls(const SendPaths& p);

}  // namespace icn::testpair
