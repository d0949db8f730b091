// ncclProfiler_v5_t (NCCL 2.28), written from NCCL's published profiler headers (facts, not copied code).
// Only the event kinds and states ICN uses are named; the descriptor layout is complete so offsets match.
#pragma once
#include <sys/types.h>

#include "abi/nccl_common.h"

extern "C" {
enum {
  ncclProfileGroup = (1 << 0),
  ncclProfileColl = (1 << 1),
  ncclProfileP2p = (1 << 2),
  ncclProfileProxyOp = (1 << 3),
  ncclProfileProxyStep = (1 << 4),
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),
  ncclProfileNetPlugin = (1 << 7),
  ncclProfileGroupApi = (1 << 8),
  ncclProfileCollApi = (1 << 9),
  ncclProfileP2pApi = (1 << 10),
  ncclProfileKernelLaunch = (1 << 11),
};

typedef enum {
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,  // stateArgs->kernelCh.pTimer = GPU global timer at the channel's end
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24
} ncclProfilerEventState_v5_t;

// v5's events, the members of the descriptor's union. v6's descriptor keeps them at the same offsets and adds its
// copy-engine events after them (NCCL's v6 header spells them out again); here one list serves both versions.
#define ICN_PROFILER_EVENTS_V5                                                              \
  struct {                                                                                  \
    bool graphCaptured;                                                                     \
    int groupDepth;                                                                         \
  } groupApi;                                                                               \
  struct {                                                                                  \
    const char* func;                                                                       \
    size_t count;                                                                           \
    const char* datatype;                                                                   \
    int root;                                                                               \
    void* stream;                                                                           \
    bool graphCaptured;                                                                     \
  } collApi;                                                                                \
  struct {                                                                                  \
    const char* func;                                                                       \
    size_t count;                                                                           \
    const char* datatype;                                                                   \
    void* stream;                                                                           \
    bool graphCaptured;                                                                     \
  } p2pApi;                                                                                 \
  struct {                                                                                  \
    void* stream;                                                                           \
  } kernelLaunch;                                                                           \
  struct {                                                                                  \
    uint64_t seqNumber;                                                                     \
    const char* func; /* "AllReduce", ... */                                                \
    const void* sendBuff;                                                                   \
    void* recvBuff;                                                                         \
    size_t count;                                                                           \
    int root;                                                                               \
    const char* datatype; /* "ncclFloat32", ... */                                          \
    uint8_t nChannels;    /* channels the collective really runs on (= KernelCh events to expect) */ \
    uint8_t nWarps;                                                                         \
    const char* algo;  /* "RING", "TREE", ... */                                            \
    const char* proto; /* "LL", "LL128", "SIMPLE" */                                        \
    void* parentGroup;                                                                      \
  } coll;                                                                                   \
  struct {                                                                                  \
    const char* func;                                                                       \
    void* buff;                                                                             \
    const char* datatype;                                                                   \
    size_t count;                                                                           \
    int peer;                                                                               \
    uint8_t nChannels;                                                                      \
    void* parentGroup;                                                                      \
  } p2p;                                                                                    \
  struct {                                                                                  \
    pid_t pid;                                                                              \
    uint8_t channelId;                                                                      \
    int peer;                                                                               \
    int nSteps;                                                                             \
    int chunkSize;                                                                          \
    int isSend;                                                                             \
  } proxyOp;                                                                                \
  struct {                                                                                  \
    int step;                                                                               \
  } proxyStep;                                                                              \
  struct {                                                                                  \
    uint8_t channelId;                                                                      \
    uint64_t pTimer; /* GPU global timer (ns) when the channel started */                   \
  } kernelCh;                                                                               \
  struct {                                                                                  \
    int64_t id;                                                                             \
    void* data;                                                                             \
  } netPlugin;

typedef struct {
  uint64_t type;    // one ncclProfile* bit
  void* parentObj;  // handle we returned for the parent (a KernelCh's parent is its Coll)
  int rank;
  union {
    ICN_PROFILER_EVENTS_V5
  };
} ncclProfilerEventDescr_v5_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;

}

// The table of calls of v5 and later versions, over each version's descriptor, state and state-argument types
// (the calls themselves have not changed since v5).
template <typename EventDescr, typename EventState, typename EventStateArgs>
struct icnProfilerTable {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* ctx, void** eHandle, EventDescr* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, EventState eState, EventStateArgs* eStateArgs);
  ncclResult_t (*finalize)(void* ctx);
};
typedef icnProfilerTable<ncclProfilerEventDescr_v5_t, ncclProfilerEventState_v5_t, ncclProfilerEventStateArgs_v5_t>
    ncclProfiler_v5_t;

static_assert(sizeof(ncclProfilerEventState_v5_t) == 4);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, parentObj) == 8);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, rank) == 16);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.func) == 32);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.count) == 56);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.datatype) == 72);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.nChannels) == 80);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.algo) == 88);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.proto) == 96);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.channelId) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.pTimer) == 32);
static_assert(sizeof(ncclProfilerEventDescr_v5_t) == 112);
static_assert(sizeof(ncclProfilerEventStateArgs_v5_t) == 8);
static_assert(sizeof(ncclProfiler_v5_t) == 48);
