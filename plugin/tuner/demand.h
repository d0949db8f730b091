// Process-wide measurement demand: NCCL's profiler event mask is one per process, so the tuner's buckets of every
// communicator share one count of who wants calls timed, and one quiet request (a duel asking for untimed calls).
#pragma once
#include <atomic>
#include <cstdint>

namespace icn::tuner {

// Number of buckets (all groups) currently exploring plus open sampling windows: the profiler measures while > 0.
std::atomic<int>& measurementDemand();
// Called when measurementDemand() crosses 0 <-> 1 (the profiler adapter installs it to flip NCCL's event mask).
void setDemandHook(void (*hook)(bool wanted));
void demandChanged(int delta);
// A quiet duel's bucket asks for the process's next call untimed (on) or timed again (off). One bucket holds the
// request; a call of any other bucket ends it (noteCallForQuiet), as does the group's end (releaseQuiet). The
// profiler measures while some demand remains beyond the holder's own: a bucket measuring elsewhere keeps every
// call timed.
void requestQuiet(const void* group, int coll, int bucket, bool on);
void noteCallForQuiet(const void* group, int coll, int bucket);
void releaseQuiet(const void* group);
// Whether the profiler should time the next call now.
bool measurementWanted();
// Process-wide count of tuner decisions made while something measures (all groups): the clock for parking idle
// exploring buckets.
uint64_t tunerTick();
// Advances that clock by one decision; returns the new tick.
uint64_t advanceTunerTick();

}  // namespace icn::tuner
