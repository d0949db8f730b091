// icn-hang on sample report sets (test/fixtures/diagnose): one folder per host with a stopped process, a leader's
// merged file with a stuck link, a directory with an idle rank and a broken file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "core/json.h"

namespace {

struct Result {
  int status = -1;
  std::string out;
};

Result run(const std::string& args) {
  const std::string cmd = std::string(ICN_HANG_CLI) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.out += buf;
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string fixture(const char* name) { return std::string(ICN_SOURCE_DIR) + "/test/fixtures/diagnose/" + name; }

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// Paragraphs are folded at 100 columns: compare with line breaks as spaces.
std::string unfolded(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

TEST(IcnHang, StoppedProcessAcrossHostFoldersIsThePrimeSuspect) {
  const Result r = run(fixture("sigstop"));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string t = unfolded(r.out);
  EXPECT_TRUE(has(t, "3 reports read from 3 files.")) << r.out;
  EXPECT_TRUE(has(t, "comm 0x7a3f09c2d4e1b850 (3 of 4 ranks reported): missing_process")) << r.out;
  EXPECT_TRUE(has(t, "Rank 2 on gpu-b (10.88.0.3) did not report: its process is stopped (SIGSTOP), dead")) << r.out;
  EXPECT_TRUE(has(t, "2 ranks wait on it directly (1 and 3)")) << r.out;
  EXPECT_TRUE(has(t, "  - rank 3 on gpu-b (10.88.0.3) waits to send to rank 2: tag 12, 0 bytes of 512.0 KiB, no "
                     "clear-to-send yet, posted 31.1 s ago"))
      << r.out;
}

TEST(IcnHang, MergedFileWithAStuckLinkNamesTheLink) {
  const Result r = run(fixture("stuck-link/icn-hang-merged-0x51c0ffee.json"));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string t = unfolded(r.out);
  EXPECT_TRUE(has(t, "4 reports read from 1 files.")) << r.out;
  EXPECT_TRUE(has(t, "stuck_link")) << r.out;
  EXPECT_TRUE(has(t, "The link rank 1 on gpu-a (10.88.0.2) -> rank 2 on gpu-b (10.88.0.3) stopped moving bytes: rank "
                     "1's send of 4.0 MiB (tag 3) and rank 2's receive wait on each other with 1.5 MiB through and no "
                     "progress for 26.1 s; 2 other ranks wait behind it (3 -> 2)"))
      << r.out;
}

TEST(IcnHang, IdleRankAndABrokenFileThatIsSkipped) {
  const Result r = run(fixture("idle-rank"));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string t = unfolded(r.out);
  EXPECT_TRUE(has(t, "icn-hang-broken-1.json: offset")) << r.out;
  EXPECT_TRUE(has(t, "(skipped)")) << r.out;
  EXPECT_TRUE(has(t, "Rank 2 on node2 (192.168.1.12) waits on no peer while 2 of 3 reporting ranks wait on it, "
                     "directly or through others (0 -> 1 -> 2): its process is alive (pid 302 reported)"))
      << r.out;
}

TEST(IcnHang, JsonOutputAndCommFilter) {
  Result r = run("--json " + fixture("sigstop") + " " + fixture("stuck-link"));
  ASSERT_EQ(r.status, 0) << r.out;
  icn::json::Value v;
  std::string err;
  ASSERT_TRUE(icn::json::parse(r.out, v, err)) << err << "\n" << r.out;
  ASSERT_EQ(v.arr.size(), 2u);
  r = run("--json --comm 0x51c0ffee " + fixture("sigstop") + " " + fixture("stuck-link"));
  ASSERT_TRUE(icn::json::parse(r.out, v, err)) << err << "\n" << r.out;
  ASSERT_EQ(v.arr.size(), 1u);
  EXPECT_EQ(v.arr[0].string("kind"), "stuck_link");
  EXPECT_EQ(v.arr[0].number("link_from"), 1);
  EXPECT_EQ(v.arr[0].number("link_to"), 2);
}

TEST(IcnHang, UsageAndNothingToRead) {
  EXPECT_EQ(run("").status, 2);
  EXPECT_EQ(run("--bogus x").status, 2);
  char dir[] = "/tmp/icn-hang-empty-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const Result none = run(dir);
  rmdir(dir);
  EXPECT_EQ(none.status, 2) << none.out;
  EXPECT_TRUE(has(none.out, "no report could be read")) << none.out;
}
