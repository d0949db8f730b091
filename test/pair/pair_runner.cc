#include "pair_runner.h"

#include "leak_check.h"
#include "pair_remote.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace icn::testpair {

std::chrono::milliseconds closeBound() {
  const char* v = getenv("ICN_CONF_CLOSE_BOUND_MS");
  long ms = v && *v ? atol(v) : 50;
  return std::chrono::milliseconds(ms < 1 ? 50 : ms > 1000 ? 1000 : ms);
}

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

bool RankOutcome::cleanExit() const { return !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

bool RankOutcome::warnHas(std::initializer_list<std::string> needles) const {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("WARN") == std::string::npos) continue;
    bool all = true;
    for (auto& n : needles) all = all && line.find(n) != std::string::npos;
    if (all) return true;
  }
  return false;
}

namespace {

std::string logPath(pid_t parent, int rank) {
  return "/tmp/icn-rel-" + std::to_string(parent) + "-rank" + std::to_string(rank) + ".log";
}

[[noreturn]] void rankMain(int rank, int fd, RankSetup setup, const Body& body, pid_t parent) {
  if (setup.netns.empty()) {
    std::string var = "ICN_PAIR_RANK" + std::to_string(rank) + "_HOST";
    if (const char* host = getenv(var.c_str()); host && *host) setup.netns = host;
  }
  int log = open(logPath(parent, rank).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log >= 0) {
    dup2(log, 2);
    close(log);
  }
  if (!setup.netns.empty()) {
    std::string p = "/var/run/netns/" + setup.netns;
    int ns = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
      fprintf(stderr, "rank %d: cannot enter network namespace %s: %s\n", rank, setup.netns.c_str(), strerror(errno));
      _exit(5);
    }
    close(ns);
    // What `ip netns exec` does besides setns: a private mount namespace with /sys remounted, so sysfs
    // (where UCX and our interface probing look) shows this namespace's devices.
    if (unshare(CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0 ||
        umount2("/sys", MNT_DETACH) != 0 || mount(setup.netns.c_str(), "/sys", "sysfs", 0, nullptr) != 0) {
      fprintf(stderr, "rank %d: cannot remount /sys for namespace %s: %s\n", rank, setup.netns.c_str(), strerror(errno));
      _exit(5);
    }
    if (unshare(CLONE_NEWUTS) != 0 || sethostname(setup.netns.data(), setup.netns.size()) != 0) {
      fprintf(stderr, "rank %d: cannot become host %s: %s\n", rank, setup.netns.c_str(), strerror(errno));
      _exit(5);
    }
    setenv("NCCL_HOSTID", setup.netns.c_str(), 1);
  }
  for (auto& [k, v] : setup.env) setenv(k.c_str(), v.c_str(), 1);
  {
    Rank r{rank, {}, netapi::Pipe(fd)};
    pid_t me = getpid();
    if (!r.peer.send(&me, sizeof me) || !r.peer.recv(&r.peerPid, sizeof r.peerPid)) _exit(6);
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
  _exit(icn::test::childExitStatus(0));  // the plugin is finalized: what is still allocated and unreachable leaked
}

void replay(const std::array<RankOutcome, 2>& out) {
  // Replayed so ctest --output-on-failure shows what each rank said.
  for (int r = 0; r < 2; r++) {
    std::istringstream lines(out[r].log);
    std::string line;
    while (std::getline(lines, line)) fprintf(stderr, "  rank %d (pid %d): %s\n", r, out[r].pid, line.c_str());
  }
}

std::string readLog(pid_t parent, int rank) {
  std::string p = logPath(parent, rank);
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  unlink(p.c_str());
  return ss.str();
}

// One rank here, the other on the peer host (pair_remote.h): the same outcome for the caller, both ranks'
// exit status and log, so suites need no change.
std::array<RankOutcome, 2> runPairAcrossHosts(const Body& rank0, const Body& rank1,
                                              const std::array<RankSetup, 2>& setup, std::chrono::seconds timeout) {
  std::array<RankOutcome, 2> out;
  const int me = remote::config().rank, other = 1 - me;
  out[0].status = out[1].status = 1 << 8;  // exit 1 until known
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "(no test)";
  static int pairs = 0;
  test += " #" + std::to_string(++pairs);
  remote::Link link;
  std::string err;
  if (!remote::open(test, timeout, &link, &err)) {
    ADD_FAILURE() << "rank " << me << ": " << err;
    return out;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  out[me].pid = fork();
  if (out[me].pid == 0) {
    close(link.control);
    rankMain(me, link.data, setup[me], me == 0 ? rank0 : rank1, parent);
  }
  close(link.data);  // the child's end only: its death must close the pipe for the peer rank
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (waitpid(out[me].pid, &out[me].status, WNOHANG) != out[me].pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(out[me].pid, SIGKILL);
      waitpid(out[me].pid, &out[me].status, 0);
      out[me].hung = true;
      ADD_FAILURE() << "rank " << me << " did not finish within " << timeout.count() << " s (hang)";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out[me].log = readLog(parent, me);
  remote::Outcome mine{out[me].pid, out[me].status, out[me].hung, out[me].log}, theirs;
  // The peer's rank may still run for up to its own timeout.
  if (remote::exchange(link.control, mine, &theirs, timeout + std::chrono::seconds(30), &err)) {
    out[other].pid = theirs.pid;
    out[other].status = theirs.status;
    out[other].hung = theirs.hung;
    out[other].log = theirs.log;
    if (theirs.hung) ADD_FAILURE() << "rank " << other << " (peer host) did not finish within " << timeout.count() << " s (hang)";
  } else {
    out[other].hung = true;
    ADD_FAILURE() << "rank " << other << ": " << err;
  }
  replay(out);
  return out;
}

}  // namespace

std::array<RankOutcome, 2> runPair(const Body& rank0, const Body& rank1, const std::array<RankSetup, 2>& setup,
                                   std::chrono::seconds timeout) {
  if (remote::config().rank >= 0) return runPairAcrossHosts(rank0, rank1, setup, timeout);
  std::array<RankOutcome, 2> out;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << strerror(errno);
    return out;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  for (int r = 0; r < 2; r++) {
    out[r].pid = fork();
    if (out[r].pid == 0) {
      close(sv[1 - r]);
      rankMain(r, sv[r], setup[r], r == 0 ? rank0 : rank1, parent);
    }
  }
  close(sv[0]);
  close(sv[1]);
  bool exited[2] = {false, false};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!(exited[0] && exited[1])) {
    for (int r = 0; r < 2; r++)
      if (!exited[r] && waitpid(out[r].pid, &out[r].status, WNOHANG) == out[r].pid) exited[r] = true;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < 2; r++)
        if (!exited[r]) {
          kill(out[r].pid, SIGKILL);
          waitpid(out[r].pid, &out[r].status, 0);
          exited[r] = true;
          out[r].hung = true;
          ADD_FAILURE() << "rank " << r << " did not finish within " << timeout.count() << " s (hang)";
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < 2; r++) out[r].log = readLog(parent, r);
  replay(out);
  for (int r = 0; r < 2; r++)
    if (!out[r].hung && WIFEXITED(out[r].status) && WEXITSTATUS(out[r].status) == icn::test::kLeakExitStatus)
      ADD_FAILURE() << "rank " << r << ": LeakSanitizer found leaks (its report is in the rank's log above)";
  return out;
}

long rssKiB() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int openFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

}  // namespace icn::testpair
