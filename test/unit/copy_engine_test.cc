#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "core/copy_engine.h"

using namespace icn;

namespace {
void waitDone(CopyCompletion& c) {
  for (int i = 0; i < 5000000 && !c.done(); i++) std::this_thread::yield();
}
}  // namespace

TEST(CopyEngine, CopiesLocallyInChunksAndNotifies) {
  CopyEngine e(3, 4096);
  std::vector<uint8_t> src(1 << 20), dst(1 << 20, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i * 7 + 1);
  uint64_t flag = 0;
  CopyCompletion c;
  c.notifyPid = getpid();
  c.notifyWord = &flag;
  ASSERT_EQ(e.submit(getpid(), dst.data(), src.data(), src.size() - 5, &c), Status::Ok);
  waitDone(c);
  ASSERT_TRUE(c.done());
  EXPECT_EQ(c.errnoValue.load(), 0);
  EXPECT_EQ(flag, 1u);
  EXPECT_TRUE(std::equal(src.begin(), src.end() - 5, dst.begin()));
  EXPECT_EQ(dst[dst.size() - 1], 0) << "copied past the requested size";
}

TEST(CopyEngine, PullsFromAnotherProcessAndReportsADeadOne) {
  std::vector<uint8_t> src(300000);
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i % 251);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {  // the child keeps src alive (same virtual address after fork)
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    char b = 1;
    (void)!write(pipefd[1], &b, 1);
    pause();
    _exit(0);
  }
  char b;
  ASSERT_EQ(read(pipefd[0], &b, 1), 1);
  std::fill(src.begin(), src.end(), 0);  // our copy differs; the child's still has the pattern
  std::vector<uint8_t> dst(src.size());
  CopyEngine e(2, 65536);
  CopyCompletion c;
  ASSERT_EQ(e.submit(child, dst.data(), src.data(), dst.size(), &c), Status::Ok);
  waitDone(c);
  ASSERT_TRUE(c.done());
  if (c.errnoValue.load() == EPERM) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    GTEST_SKIP() << "cross-process reads are refused on this machine (ptrace policy)";
  }
  EXPECT_EQ(c.errnoValue.load(), 0);
  for (size_t i = 0; i < dst.size(); i++) ASSERT_EQ(dst[i], static_cast<uint8_t>(i % 251)) << "offset " << i;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CopyCompletion dead;
  ASSERT_EQ(e.submit(child, dst.data(), src.data(), dst.size(), &dead), Status::Ok);
  waitDone(dead);
  EXPECT_NE(dead.errnoValue.load(), 0) << "reading a dead process must fail";
}
