// What a transport's connection holds for the diagnosis: its monitor (opened with the connection, closed with it)
// and a share of the process's tick thread, which runs while any watched connection is open and the diagnosis is
// on (ICN_HANG_REPORT_S or ICN_STRAGGLER_REPORT_S not 0). The thread wakes about once a second and runs
// diagnoser().tick(): straggler periods, hang reports. It is joined when the last watched connection closes, so no
// thread of the plugin outlives NCCL's use of it (NCCL unloads the plugin once its communicators are gone).
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
  bool ticking_ = false;  // holds a share of the tick thread
};

// Whether the tick thread runs now (tests).
bool tickThreadRunning();

}  // namespace icn::diagnose
