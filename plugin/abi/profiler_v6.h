// ncclProfiler_v6_t (NCCL 2.29+): v5's calls (icnProfilerTable); the event descriptor adds copy-engine collective
// events (CeColl, CeSync, CeBatch) after v5's union members, whose offsets are unchanged. State arguments are v5's.
#pragma once
#include "abi/profiler_v5.h"

extern "C" {
enum {
  ncclProfileCeColl = (1 << 12),
  ncclProfileCeSync = (1 << 13),
  ncclProfileCeBatch = (1 << 14),
};

typedef ncclProfilerEventState_v5_t ncclProfilerEventState_v6_t;  // v6 adds states 25..30 (CE start/complete)
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  uint64_t type;    // one ncclProfile* bit
  void* parentObj;  // handle we returned for the parent (a KernelCh's parent is its Coll)
  int rank;
  union {
    ICN_PROFILER_EVENTS_V5
    // v6: collectives run by the copy engines (no kernel, so no KernelCh events); NCCL reports their start
    // and completion as start/stop of these events.
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

}

typedef icnProfilerTable<ncclProfilerEventDescr_v6_t, ncclProfilerEventState_v6_t, ncclProfilerEventStateArgs_v6_t>
    ncclProfiler_v6_t;

static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.count) == 56);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy) == 80);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream) == 104);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.totalBytes) == 32);
static_assert(sizeof(ncclProfilerEventDescr_v6_t) == 112);
static_assert(sizeof(ncclProfilerEventStateArgs_v6_t) == 8);
static_assert(sizeof(ncclProfiler_v6_t) == 48);
