// What a transport's connection holds for the diagnosis: its monitor (opened with the connection, closed with it).
// The first watched connection starts the process's tick thread when the diagnosis is on (ICN_HANG_REPORT_S or
// ICN_STRAGGLER_REPORT_S not 0): it wakes about once a second and runs diagnoser().tick() (straggler periods, hang
// reports) until the process exits or NCCL unloads the plugin, where it is joined, so no thread of the plugin
// outlives the library.
#pragma once
#include <memory>

#include "core/net_counters.h"
#include "diagnose/link_monitor.h"

namespace icn::diagnose {

// Who is on both ends of a transport's connection, as the diagnosis names them: our host, the addresses of a
// socket of the connection on each side (-1: none), the peer's host from its name ("host:pid").
LinkInfo linkInfoFor(const NetCommInfo& info, int socketFd);

class ConnectionWatch {
 public:
  explicit ConnectionWatch(LinkInfo info);
  ~ConnectionWatch();
  ConnectionWatch(const ConnectionWatch&) = delete;
  ConnectionWatch& operator=(const ConnectionWatch&) = delete;

  LinkMonitor& monitor() { return *monitor_; }

 private:
  std::shared_ptr<LinkMonitor> monitor_;
};

// Whether the tick thread runs now, and stopping it (tests).
bool tickThreadRunning();
void stopTickThreadForTesting();

}  // namespace icn::diagnose
