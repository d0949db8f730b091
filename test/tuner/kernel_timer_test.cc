// Profiler event bookkeeping: parent/child links, out-of-order stops, stale handles, bounded pools.
#include <gtest/gtest.h>

#include <vector>

#include "telemetry/kernel_timer.h"

using namespace icn::telemetry;

namespace {
struct Recorder {
  std::vector<CollTiming> got;
  KernelTimer::Sink sink() {
    return [this](const CollTiming& t) { got.push_back(t); };
  }
};

CollStartInfo allReduce(uint64_t count, int channels, const char* algo = "RING", const char* proto = "LL128") {
  return CollStartInfo{"AllReduce", "ncclFloat32", algo, proto, count, channels};
}
}  // namespace

TEST(KernelTimer, NcclOrderCollStopsBeforeChannels) {
  Recorder r;
  KernelTimer kt(2, r.sink());
  void* c = kt.startColl(allReduce(1 << 18, 2));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(KernelTimer::owner(c), &kt);
  kt.stop(c);  // "enqueued": long before the GPU ran
  void* k0 = kt.startKernelCh(c, 0, 1000);
  void* k1 = kt.startKernelCh(c, 1, 1100);
  ASSERT_NE(k0, nullptr);
  ASSERT_NE(k1, nullptr);
  kt.recordKernelChStop(k1, 9000);
  kt.recordKernelChStop(k0, 8000);
  kt.stop(k1);  // channels stop in any order
  EXPECT_TRUE(r.got.empty());
  kt.stop(k0);
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].gpuNs, 8000u);  // last stop 9000 - first start 1000
  EXPECT_EQ(r.got[0].bytes, uint64_t{1} << 20);
  EXPECT_EQ(r.got[0].coll, 4);
  EXPECT_EQ(r.got[0].algo, 1);
  EXPECT_EQ(r.got[0].proto, 1);
  EXPECT_EQ(r.got[0].channels, 2);
  EXPECT_EQ(kt.stats().completed, 1u);
}

TEST(KernelTimer, CollStopAfterChannelsAndLateChannelStart) {
  Recorder r;
  KernelTimer kt(2, r.sink());
  void* c = kt.startColl(allReduce(256, 2, "TREE", "LL"));
  void* k0 = kt.startKernelCh(c, 0, 50);
  kt.recordKernelChStop(k0, 80);
  kt.stop(k0);  // first channel done before the second even started
  void* k1 = kt.startKernelCh(c, 1, 60);
  ASSERT_NE(k1, nullptr);
  kt.recordKernelChStop(k1, 150);
  kt.stop(k1);
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].gpuNs, 100u);
  kt.stop(c);  // coll stop last: record freed now
  EXPECT_EQ(KernelTimer::owner(c), &kt);
  EXPECT_EQ(kt.startKernelCh(c, 2, 0), nullptr);  // stale parent: ignored
  EXPECT_GE(kt.stats().staleHandles, 1u);
}

TEST(KernelTimer, MissingStopStateDoesNotInventTime) {
  Recorder r;
  KernelTimer kt(1, r.sink());
  void* c = kt.startColl(allReduce(16, 2));
  void* k0 = kt.startKernelCh(c, 0, 100);
  void* k1 = kt.startKernelCh(c, 1, 100);
  kt.recordKernelChStop(k0, 400);
  kt.stop(k0);
  kt.stop(k1);  // no KernelChStop state recorded
  kt.stop(c);
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].gpuNs, 300u);
  EXPECT_EQ(kt.stats().missingTimestamps, 1u);
  // All channels without timestamps: nothing emitted.
  void* c2 = kt.startColl(allReduce(16, 1));
  void* k = kt.startKernelCh(c2, 0, 5);
  kt.stop(k);
  kt.stop(c2);
  EXPECT_EQ(r.got.size(), 1u);
}

TEST(KernelTimer, DoubleAndForeignStopsAreIgnored) {
  Recorder r;
  KernelTimer kt(1, r.sink());
  void* c = kt.startColl(allReduce(16, 1));
  kt.stop(c);
  kt.stop(c);  // double stop: no underflow
  void* k = kt.startKernelCh(c, 0, 1);
  ASSERT_NE(k, nullptr);
  kt.recordKernelChStop(k, 11);
  kt.stop(k);
  kt.stop(k);  // stale now
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(KernelTimer::owner(nullptr), nullptr);
  int x = 0;
  EXPECT_EQ(kt.startKernelCh(&x, 0, 1), nullptr);  // a pointer that is not one of our handles
  kt.stop(nullptr);
}

TEST(KernelTimer, SkipsNonCollectivesAndScalesGatherBytes) {
  Recorder r;
  KernelTimer kt(8, r.sink());
  EXPECT_EQ(kt.startColl(CollStartInfo{"SendRecv", "ncclInt8", "", "", 10, 1}), nullptr);
  void* c = kt.startColl(CollStartInfo{"AllGather", "ncclBfloat16", "RING", "SIMPLE", 1000, 1});
  void* k = kt.startKernelCh(c, 0, 0);
  kt.recordKernelChStop(k, 5);
  kt.stop(k);
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].bytes, 1000u * 2 * 8);  // the tuner's nBytes: count x size x nRanks
}

TEST(KernelTimer, PoolExhaustionEvictsOnlyUnreferencedRecords) {
  Recorder r;
  KernelTimer kt(1, r.sink(), /*collSlots=*/4, /*chSlots=*/8);
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(kt.startColl(allReduce(16, 2)));
  for (void* h : held) ASSERT_NE(h, nullptr);
  // All four still referenced by NCCL: nothing can be evicted.
  EXPECT_EQ(kt.startColl(allReduce(16, 2)), nullptr);
  EXPECT_EQ(kt.stats().droppedNoSlot, 1u);
  // Two stopped without their channels ever reporting: they linger and may be evicted.
  kt.stop(held[0]);
  kt.stop(held[1]);
  void* fresh = kt.startColl(allReduce(16, 1));
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(kt.stats().evicted, 1u);
  EXPECT_EQ(kt.startKernelCh(held[0], 0, 1), nullptr);  // the evicted one is stale now
  void* k = kt.startKernelCh(fresh, 0, 10);
  kt.recordKernelChStop(k, 30);
  kt.stop(k);
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].gpuNs, 20u);
}

TEST(KernelTimer, HandlesOfAFinalizedTimerResolveToNothing) {
  void* c = nullptr;
  {
    KernelTimer kt(1, nullptr);
    c = kt.startColl(allReduce(16, 1));
    ASSERT_NE(c, nullptr);
  }
  EXPECT_EQ(KernelTimer::owner(c), nullptr);
}

TEST(KernelTimer, ManyCollectivesRecycleSlots) {
  Recorder r;
  KernelTimer kt(2, r.sink(), 16, 32);
  for (int i = 0; i < 1000; ++i) {
    void* c = kt.startColl(allReduce(1024, 2));
    ASSERT_NE(c, nullptr) << i;
    kt.stop(c);
    void* a = kt.startKernelCh(c, 0, 0);
    void* b = kt.startKernelCh(c, 1, 1);
    kt.recordKernelChStop(a, 10);
    kt.recordKernelChStop(b, 20 + i % 5);
    kt.stop(b);
    kt.stop(a);
  }
  EXPECT_EQ(r.got.size(), 1000u);
  EXPECT_EQ(kt.stats().droppedNoSlot, 0u);
}

// The tuner's per-call cost is measured from the previous timed collective's end: timings carry the stop time,
// their order among this timer's collectives and the caller's epoch tag.
TEST(KernelTimer, TimingsCarryStopSequenceAndEpoch) {
  Recorder r;
  KernelTimer kt(2, r.sink());
  for (uint32_t i = 0; i < 3; ++i) {
    CollStartInfo info = allReduce(256, 1);
    info.epoch = 7 + (i == 2 ? 1 : 0);
    void* c = kt.startColl(info);
    ASSERT_NE(c, nullptr);
    kt.stop(c);
    void* k = kt.startKernelCh(c, 0, 1000 * (i + 1));
    kt.recordKernelChStop(k, 1000 * (i + 1) + 400);
    kt.stop(k);
  }
  ASSERT_EQ(r.got.size(), 3u);
  EXPECT_EQ(r.got[1].seq, r.got[0].seq + 1);
  EXPECT_EQ(r.got[2].seq, r.got[1].seq + 1);
  EXPECT_EQ(r.got[1].stopNs - r.got[0].stopNs, 1000u);
  EXPECT_EQ(r.got[1].gpuNs, 400u);
  EXPECT_EQ(r.got[0].epoch, 7u);
  EXPECT_EQ(r.got[2].epoch, 8u);
}
