// ncclProfiler_v6_t (NCCL 2.29+): v5's calls; the event descriptor adds copy-engine collective events (CeColl,
// CeSync, CeBatch) after v5's union members, whose offsets are unchanged. State arguments are v5's.
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
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;  // "AllReduce", ...
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;  // "ncclFloat32", ...
      uint8_t nChannels;     // channels the collective really runs on (= KernelCh events to expect)
      uint8_t nWarps;
      const char* algo;   // "RING", "TREE", ...
      const char* proto;  // "LL", "LL128", "SIMPLE"
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // GPU global timer (ns) when the channel started
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
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

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* ctx, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v6_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* ctx);
} ncclProfiler_v6_t;
}

static_assert(offsetof(ncclProfilerEventDescr_v6_t, parentObj) == 8);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, rank) == 16);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.func) == 32);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.count) == 56);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.datatype) == 72);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.nChannels) == 80);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.algo) == 88);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.proto) == 96);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, kernelCh.channelId) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, kernelCh.pTimer) == 32);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.count) == 56);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy) == 80);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream) == 104);
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.totalBytes) == 32);
static_assert(sizeof(ncclProfilerEventDescr_v6_t) == 112);
static_assert(sizeof(ncclProfilerEventStateArgs_v6_t) == 8);
static_assert(sizeof(ncclProfiler_v6_t) == 48);
