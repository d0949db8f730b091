// Two ranks as two forked processes (forked before either loads the plugin, so no plugin state is
// inherited), joined by a socketpair for handles and barriers; shared by the conformance and the
// reliability suites. Per-rank environment and network namespace are applied before the plugin
// loads, each rank's stderr is captured (tests assert on its WARN lines) and replayed, and each rank
// knows its peer's pid. Rank bodies use gtest assertions; a rank exits non-zero when any failed.
// Across real hosts (ICN_PAIR_RANK, ICN_PAIR_PEER: pair_remote.h) a process runs only its own rank, the
// pipe is a TCP connection, peerPid is a pid on the peer host, and the peer's outcome arrives by TCP.
#pragma once
#include <sys/types.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "net_api.h"

namespace icn::testpair {

struct Rank {
  int rank;
  netapi::Plugin plugin;
  netapi::Pipe peer;
  pid_t peerPid = 0;
  // rank 0 listens and passes its handle; rank 1 connects. *listenComm keeps the listen comm open.
  void connectPair(void** sendComm, void** recvComm, void** listenComm = nullptr);
};

struct RankSetup {
  std::vector<std::pair<std::string, std::string>> env;  // set before the plugin loads
  std::string netns;                                     // "ip netns" name to enter first (empty: stay)
  // With netns set: the rank also gets its own UTS namespace with the namespace's name as hostname, so
  // it is a separate host for ICN and NCCL. Empty netns: ICN_PAIR_RANK<n>_HOST (an emulated host of
  // tools/testbed/icn-testbed) applies, so whole suites can run across hosts without code changes.
};

struct RankOutcome {
  pid_t pid = 0;
  int status = 0;      // waitpid status
  bool hung = false;   // killed at the deadline
  std::string log;     // everything the rank wrote to stderr
  bool cleanExit() const;
  bool logHas(const std::string& needle) const { return log.find(needle) != std::string::npos; }
  // A WARN line that contains all needles.
  bool warnHas(std::initializer_list<std::string> needles) const;
};

using Body = std::function<void(Rank&)>;
std::array<RankOutcome, 2> runPair(const Body& rank0, const Body& rank1, const std::array<RankSetup, 2>& setup = {},
                                   std::chrono::seconds timeout = std::chrono::seconds(120));

std::string pluginPath();
constexpr std::chrono::milliseconds kWait{60000};

// How long one close may take: NCCL closes a communicator's connections one after another, so a close never
// waits for its peer. 50 ms by default; ICN_CONF_CLOSE_BOUND_MS raises it (at most 1000) where every instruction
// runs many times slower (under valgrind a UCX close measured 55 ms). A close that waits for its
// peer takes the transports' 2 s close deadline, so a bound under 1 s still tells them apart.
std::chrono::milliseconds closeBound();

// Resident set size of this process in KiB, and its open descriptor count.
long rssKiB();
int openFds();

}  // namespace icn::testpair
