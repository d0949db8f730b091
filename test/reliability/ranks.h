// Two ranks as two forked processes (like the conformance suite) with what fault tests need on top:
// per-rank environment and network namespace applied before the plugin loads, each rank's stderr
// captured so tests can assert on its WARN lines, and each rank knowing its peer's pid.
#pragma once
#include <sys/types.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "net_api.h"

namespace icn::rel {

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

// Resident set size of this process in KiB, and its open descriptor count.
long rssKiB();
int openFds();

}  // namespace icn::rel
