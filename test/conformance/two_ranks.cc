#include "two_ranks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

namespace icn::conformance {

std::string pluginPath() {
  const char* env = getenv("ICN_PLUGIN_PATH");
  return env ? env : ICN_DEFAULT_PLUGIN_PATH;
}

void Rank::connectPair(void** sendComm, void** recvComm, void** listenComm) {
  if (rank == 0) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* l = nullptr;
    ASSERT_EQ(plugin.net->listen(plugin.ctx, 0, handle, &l), ncclSuccess);
    ASSERT_TRUE(peer.send(handle, sizeof handle));
    ASSERT_EQ(netapi::acceptBlocking(plugin, l, recvComm, kWait), ncclSuccess);
    ASSERT_NE(*recvComm, nullptr);
    if (listenComm)
      *listenComm = l;
    else
      ASSERT_EQ(plugin.net->closeListen(l), ncclSuccess);
  } else {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    ASSERT_TRUE(peer.recv(handle, sizeof handle));
    ASSERT_EQ(netapi::connectBlocking(plugin, 0, handle, sendComm, kWait), ncclSuccess);
    ASSERT_NE(*sendComm, nullptr);
  }
}

namespace {

// Per-rank environment, e.g. ICN_CONF_RANK0_ENV="ICN_IB_HCA=rxe0" in the Soft-RoCE VM.
void applyRankEnv(int rank) {
  std::string var = "ICN_CONF_RANK" + std::to_string(rank) + "_ENV";
  const char* spec = getenv(var.c_str());
  if (!spec) return;
  std::istringstream in(spec);
  std::string kv;
  while (in >> kv) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
}

[[noreturn]] void rankMain(int rank, int fd, const std::function<void(Rank&)>& body) {
  applyRankEnv(rank);
  {
    Rank r{rank, {}, netapi::Pipe(fd)};
    std::string err;
    if (!r.plugin.load(pluginPath(), &err)) {
      fprintf(stderr, "rank %d: cannot load plugin: %s\n", rank, err.c_str());
      _exit(3);
    }
    if (r.plugin.init() != ncclSuccess) {
      fprintf(stderr, "rank %d: plugin init failed\n", rank);
      _exit(4);
    }
    body(r);
    fflush(stdout);
    fflush(stderr);
    if (::testing::Test::HasFailure()) _exit(1);
  }
  _exit(0);
}

}  // namespace

void runTwoRanks(const std::function<void(Rank&)>& rank0, const std::function<void(Rank&)>& rank1, RunOptions opts) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    ASSERT_GE(pids[r], 0);
    if (pids[r] == 0) {
      close(sv[1 - r]);
      rankMain(r, sv[r], r == 0 ? rank0 : rank1);
    }
  }
  close(sv[0]);
  close(sv[1]);
  int status[2] = {-1, -1};
  bool exited[2] = {false, false};
  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  while (!(exited[0] && exited[1])) {
    for (int r = 0; r < 2; r++) {
      if (!exited[r] && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) exited[r] = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < 2; r++)
        if (!exited[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          exited[r] = true;
          ADD_FAILURE() << "rank " << r << " did not finish within " << opts.timeout.count() << " s (hang)";
          status[r] = 0;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool killedOk[2] = {opts.expectRank0Killed, opts.expectRank1Killed};
  for (int r = 0; r < 2; r++) {
    if (killedOk[r]) {
      EXPECT_TRUE(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL) << "rank " << r << " should have been killed";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
        << "rank " << r << " failed (exit " << (WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1) << ", signal "
        << (WIFSIGNALED(status[r]) ? WTERMSIG(status[r]) : 0) << ")";
  }
}

}  // namespace icn::conformance
