// The process's open connections as the diagnosis sees them. Transports open a monitor per connection when it is
// set up and close it before the connection goes (never on the data path: a process-wide mutex is fine here);
// the reporter enumerates them.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "diagnose/hang_report.h"
#include "diagnose/link_monitor.h"

namespace icn::diagnose::links {

// Connect/accept time: the monitor the connection's hooks go to (kept alive by the caller until close()).
std::shared_ptr<LinkMonitor> open(LinkInfo info);
// Before the connection is destroyed; its pending operations leave the hang report with it.
void close(const std::shared_ptr<LinkMonitor>& monitor);
std::vector<std::shared_ptr<LinkMonitor>> all();

// The communicator's size, when the profiler or tuner learns it (the hang analysis names ranks that never reported).
void setCommSize(uint64_t commId, int rank, int nranks);
// Every (commId, rank) this process holds a connection of or was told about, with nranks and our address.
std::vector<RankEntry> ranks();

void resetForTesting();

}  // namespace icn::diagnose::links
