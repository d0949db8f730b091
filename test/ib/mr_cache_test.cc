#include <gtest/gtest.h>

#include <map>

#include "transport/ib/ib_mr_cache.h"

using namespace icn::ib;
using icn::Status;

namespace {
struct FakeBackend {
  int regs = 0, deregs = 0;
  bool failNext = false;
  std::vector<MrRequest> seen;
  MrCache make() {
    return MrCache(
        [this](const MrRequest& r, void** mr, uint32_t* lkey, uint32_t* rkey, std::string* why) {
          if (failNext) { *why = "ibv_reg_mr: Bad address"; return Status::SystemError; }
          seen.push_back(r);
          ++regs;
          *mr = reinterpret_cast<void*>(uintptr_t(regs));
          *lkey = 100 + regs;
          *rkey = 200 + regs;
          return Status::Ok;
        },
        [this](void*) { ++deregs; });
  }
};
}  // namespace

TEST(IbMrCache, SameAndContainedRangesShareOneRegistration) {
  FakeBackend b;
  MrCache c = b.make();
  alignas(4096) static char buf[4 * 4096];
  MrEntry *e1, *e2, *e3;
  std::string why;
  ASSERT_EQ(c.acquire(buf + 10, 3 * 4096, 1, -1, 0, &e1, &why), Status::Ok);
  EXPECT_EQ(b.seen[0].addr, reinterpret_cast<uintptr_t>(buf)) << "start aligned down to a page";
  EXPECT_EQ(b.seen[0].length, 4u * 4096) << "end aligned up";
  ASSERT_EQ(c.acquire(buf + 100, 50, 1, -1, 0, &e2, &why), Status::Ok);
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(b.regs, 1);
  EXPECT_EQ(e1->refs, 2);
  ASSERT_EQ(c.acquire(buf + 100, 50, 2, -1, 0, &e3, &why), Status::Ok);
  EXPECT_NE(e3, e1) << "CUDA and host registrations are not shared";
  EXPECT_EQ(b.regs, 2);
  c.release(e1);
  EXPECT_EQ(b.deregs, 0);
  c.release(e2);
  EXPECT_EQ(b.deregs, 1);
  c.release(e3);
  EXPECT_EQ(b.deregs, 2);
  EXPECT_EQ(c.size(), 0u);
}

TEST(IbMrCache, FailurePropagatesWithReason) {
  FakeBackend b;
  MrCache c = b.make();
  b.failNext = true;
  MrEntry* e = nullptr;
  std::string why;
  static char buf[64];
  EXPECT_EQ(c.acquire(buf, sizeof(buf), 1, -1, 0, &e, &why), Status::SystemError);
  EXPECT_EQ(why, "ibv_reg_mr: Bad address");
  EXPECT_EQ(c.size(), 0u);
}

TEST(IbMrCache, DmabufOffsetFollowsAlignment) {
  FakeBackend b;
  MrCache c = b.make();
  MrEntry* e = nullptr;
  std::string why;
  const void* addr = reinterpret_cast<const void*>(0x7f0000001100);
  ASSERT_EQ(c.acquire(addr, 8192, 2, 7, 0x2100, &e, &why), Status::Ok);
  EXPECT_EQ(b.seen[0].addr, 0x7f0000001000u);
  EXPECT_EQ(b.seen[0].dmabufOffset, 0x2000u);
  EXPECT_EQ(b.seen[0].dmabufFd, 7);
  // An offset smaller than the misalignment cannot move: exact range.
  ASSERT_EQ(c.acquire(reinterpret_cast<const void*>(0x7f0000101100), 100, 2, 8, 0x10, &e, &why), Status::Ok);
  EXPECT_EQ(b.seen[1].addr, 0x7f0000101100u);
  EXPECT_EQ(b.seen[1].dmabufOffset, 0x10u);
}

TEST(IbMrCache, DestructorDeregistersLeftovers) {
  FakeBackend b;
  {
    MrCache c = b.make();
    MrEntry* e;
    std::string why;
    static char buf[64];
    ASSERT_EQ(c.acquire(buf, 64, 1, -1, 0, &e, &why), Status::Ok);
  }
  EXPECT_EQ(b.deregs, 1);
}
