// The process-wide registry of tuner groups: tuner contexts join their communicator's group by commId, and the
// profiler of a communicator finds it there.
#pragma once
#include <cstdint>
#include <memory>

namespace icn::tuner {

class Group;
struct GroupConfig;

std::shared_ptr<Group> acquireGroup(uint64_t commId, int nRanks, int nNodes, const GroupConfig& cfg);
std::shared_ptr<Group> findGroup(uint64_t commId);
// The profiler (initialised before the tuner) tells which ranks of a communicator live here; the process holding
// rank 0 leads the communicator's agreement across processes.
void noteLocalRank(uint64_t commId, int rank);

// Every few decisions while something measures: idle exploring buckets of every group but `self` give the profiler
// back (the caller parks its own). try_lock only, so a decision never waits here.
void parkIdleOtherGroups(const Group* self, uint64_t tick, uint64_t idleCalls);

}  // namespace icn::tuner
