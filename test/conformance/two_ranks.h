// Runs two ranks as two fresh processes (forked before either loads the plugin, so no plugin state is
// inherited), joined by a socketpair for handles and barriers. Each rank body uses gtest assertions;
// the rank's process exits non-zero when any failed, and the parent test fails with its output.
#pragma once
#include <chrono>
#include <functional>
#include <string>

#include "net_api.h"

namespace icn::conformance {

struct Rank {
  int rank;
  netapi::Plugin plugin;
  netapi::Pipe peer;
  // Standard set-up: rank 0 listens and sends its handle; rank 1 connects. Returns the comm in
  // *sendComm (rank 1) or *recvComm (rank 0).
  void connectPair(void** sendComm, void** recvComm, void** listenComm = nullptr);
};

struct RunOptions {
  std::chrono::seconds timeout{120};
  bool expectRank0Killed = false;  // rank 0 SIGKILLs itself on purpose
  bool expectRank1Killed = false;
};

// Returns after both ranks exited (killing them at the timeout); records gtest failures.
void runTwoRanks(const std::function<void(Rank&)>& rank0, const std::function<void(Rank&)>& rank1,
                 RunOptions opts = {});

std::string pluginPath();
constexpr std::chrono::milliseconds kWait{60000};

}  // namespace icn::conformance
