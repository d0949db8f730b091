// The tuner across processes, as a job with one process per GPU runs it: each rank is its own process (fork +
// exec of this binary), dlopens the built plugin and plays NCCL's part through the C ABI (profiler init with its
// rank, tuner init with the communicator's id, getCollInfo with NCCL's cost table, profiler events for timed
// calls). Each process's timings come from its own synthetic GPU, and they disagree on purpose (one process sees
// another arm fastest, one sees everything slower), the processes run at skewed paces, and in one test they live
// in separate network namespaces. The processes are coupled like NCCL's collectives couple them: none runs more
// than kAhead calls ahead of the slowest (a GPU cannot finish a collective before every rank launched it).
//
// Checked: every process makes the same choice for every call; the leader's measured winner reaches every
// process; a killed or stopped leader or follower ends in agreement that stops (never a divergence) with no call
// held longer than the wait bound; exploration costs at most 5% over NCCL's choice over a size's first 2000 calls.
#include "multiproc_harness.h"

using namespace icn::tunertest;


// Three processes, one rank each, timings that disagree: every process makes the same choice for every call, the
// leader's winner (Ring/LL128 at 4 MiB, where NCCL picks Ring/Simple) reaches all of them, and exploring costs at
// most 5% over NCCL's choice across a size's first 2000 calls.
TEST(TunerMultiproc, ProcessesAgreeOnEveryCallAndFindTheWinner) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  for (int r = 0; r < 3; ++r) job.start(r, r);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectCleanAgreedRun(res, 6000));
  EXPECT_TRUE(res[0].has("every rank's process joined")) << "the leader started the agreement";
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(res[r].has("joined the agreement leader")) << r;
  // The last calls of each size run the winner under the true costs (decisions take effect W/2 to W calls after
  // the leader's round ends).
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": Ring/LL128 at 4 MiB";
    } else {
      ASSERT_EQ(res[0].picks[i], ncclChoice(kSmall)) << "call " << i << ": NCCL's choice stays at 64 KiB";
    }
  }
  // Something was explored (the plan ran), and it stayed cheap.
  std::set<std::pair<int, int>> tried;
  for (int i = 0; i < 2000; ++i)
    if (sizeOf(i) == kBig) tried.insert(res[0].picks[i]);
  EXPECT_GE(tried.size(), 4u);
  for (size_t bytes : {kBig, kSmall}) {
    double cost = explorationCost(res[0], bytes);
    printf("MULTIPROC exploration cost over the first 2000 calls of %zu B: %.4fx NCCL's choice\n", bytes, cost);
    EXPECT_LE(cost, 1.05) << bytes << " B";
  }
}

// The processes' timings disagree about the winner: the leader (rank 0) sees Tree/Simple fastest at 4 MiB (30 us
// against Ring/LL128's 40), rank 1 sees the true costs (Ring/LL128 40, Tree/Simple 52) and rank 2, the slowest,
// sees each of its calls 1.5x slower (Ring/LL128 60, Tree/Simple 78). A collective takes as long as its slowest rank, so
// the agreed winner is the arm whose slowest process's time is least: Ring/LL128 (60 us against Tree/Simple's
// 78), not the leader's own favourite. The followers' reports reach the leader, which says what it combined.
TEST(TunerMultiproc, LeaderDecidesFromEveryProcessSlowestTimes) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  job.start(0, 1);
  job.start(1, 0);
  job.start(2, 2);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectCleanAgreedRun(res, 6000));
  EXPECT_TRUE(res[0].has("learned TREE/SIMPLE")) << "the leader's own measurements favour Tree/Simple";
  EXPECT_TRUE(res[0].has("3 processes measured")) << "every follower's report reached the leader";
  EXPECT_TRUE(res[0].has("announces RING/LL128"));
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": the slowest process's best arm";
    } else {
      ASSERT_EQ(res[0].picks[i], ncclChoice(kSmall)) << "call " << i << ": NCCL's choice stays at 64 KiB";
    }
  }
}

// Three processes; `victim` is killed (SIGKILL) once it reached call 1500. The survivors must end without error
// (else: empty), having stopped agreeing within the bound.
std::vector<Result> killOneMidway(int victim) {
  Job job(3, 1, 5000);
  EXPECT_TRUE(job.ready());
  if (!job.ready()) return {};
  for (int r = 0; r < 3; ++r) job.start(r, 0);
  while (job.progress(victim) < 1500) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  job.ignore(victim);
  job.signal(victim, SIGKILL);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(res[r].status, 0) << "rank " << r;
    if (res[r].status != 0) return {};
    EXPECT_TRUE(res[r].has("agreement across processes stops at call")) << r;
    EXPECT_LE(res[r].maxCallUs, kWaitMs * 1000.0 + 200'000) << "rank " << r << ": a call waited past the bound";
  }
  return res;
}

// The leader dies while the others go on: they stop agreeing at once (its connection closed) and keep making the
// same choices as each other; no call waits longer than the bound.
TEST(TunerMultiproc, KilledLeaderEndsTheAgreementWithoutDivergence) {
  auto res = killOneMidway(0);
  ASSERT_FALSE(res.empty());
  expectSameSequences(res, {1, 2});
  // After the stop: buckets with no agreed decision end in NCCL's choice (their fixed plans were over).
  for (int i = 4500; i < 5000; ++i) {
    if (sizeOf(i) == kSmall) {
      ASSERT_EQ(res[1].picks[i], ncclChoice(kSmall)) << i;
    }
  }
}

// A follower dies: the leader stops the agreement for everyone (FREEZE at its latest horizon, which no process
// can have passed), so the leader and the surviving follower keep choosing alike.
TEST(TunerMultiproc, KilledFollowerEndsTheAgreementWithoutDivergence) {
  auto res = killOneMidway(2);
  ASSERT_FALSE(res.empty());
  expectSameSequences(res, {0, 1});
}

// The leader stops (SIGSTOP) for a second while the followers run on into its horizon: they wait at most the
// bound, stop agreeing at the horizon they hold and tell the leader; resumed, the leader reads that before it
// announces anything else and stops at the same call. Every process, the leader included, chooses alike.
TEST(TunerMultiproc, StoppedLeaderFreezesEveryProcessAtTheSameCall) {
  Job job(3, 1, 6000);
  ASSERT_TRUE(job.ready());
  for (int r = 0; r < 3; ++r) job.start(r, 0);
  while (job.progress(0) < 1500) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  job.ignore(0);
  job.signal(0, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  job.signal(0, SIGCONT);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(res[r].status, 0) << "rank " << r;
  for (int r = 1; r < 3; ++r) {
    EXPECT_TRUE(res[r].has("no horizon from the leader in time")) << r;
    EXPECT_LE(res[r].maxCallUs, kWaitMs * 1000.0 + 200'000) << "rank " << r;
  }
  EXPECT_TRUE(res[0].has("waited in vain")) << "the leader learns why";
  expectSameSequences(res, {0, 1, 2});
}

// Two emulated hosts: network namespaces A (10.78.0.1) and B (10.78.0.2) joined by a veth pair, its end named
// `icnmv` in each.
class TwoHosts {
 public:
  TwoHosts() {
    std::string id = std::to_string(getpid() % 100000);
    ns_[0] = "icnmpA" + id;
    ns_[1] = "icnmpB" + id;
    if (sh("ip netns add " + ns_[0]) != 0) {
      skip_ = true;
      return;
    }
    sh("ip netns add " + ns_[1]);
    ok_ = sh("ip link add icnmv" + id + "a type veth peer name icnmv" + id + "b") == 0;
    const char* addr[2] = {"10.78.0.1/24", "10.78.0.2/24"};
    for (int i = 0; ok_ && i < 2; ++i) {
      std::string dev = "icnmv" + id + (i ? "b" : "a");
      ok_ = sh("ip link set " + dev + " netns " + ns_[i]) == 0 &&
            sh("ip -n " + ns_[i] + " link set " + dev + " name icnmv") == 0 &&
            sh("ip -n " + ns_[i] + " addr add " + addr[i] + " dev icnmv") == 0 &&
            sh("ip -n " + ns_[i] + " link set icnmv up") == 0 && sh("ip -n " + ns_[i] + " link set lo up") == 0;
    }
    // A link just set up may drop the first packets (a lost SYN costs a second): wait until it carries one.
    for (int i = 0; ok_ && i < 50 && sh("ip netns exec " + ns_[1] + " ping -c1 -W1 10.78.0.1") != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~TwoHosts() {
    if (skip_) return;
    for (auto& n : ns_) sh("ip netns del " + n);
  }
  bool skip() const { return skip_; }  // no namespaces here (needs root, iproute2)
  bool ok() const { return ok_; }
  const std::string& ns(int i) const { return ns_[i]; }

 private:
  static int sh(const std::string& c) { return std::system((c + " >/dev/null 2>&1").c_str()); }
  std::string ns_[2];
  bool skip_ = false, ok_ = false;
};

// Ranks on two emulated hosts: rank 0 in one network namespace, ranks 1 and 2 in another, joined by a veth pair;
// the agreement runs over TCP between them (the rendezvous directory is shared, as a cluster's file system is).
TEST(TunerMultiproc, ProcessesInSeparateNetworkNamespacesAgree) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(3, 2, 6000);
  ASSERT_TRUE(job.ready());
  job.start(0, 0, hosts.ns(0));
  job.start(1, 1, hosts.ns(1));
  job.start(2, 2, hosts.ns(1));
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r].status, 0) << "rank " << r;
  expectSameSequences(res, {0, 1, 2});
  EXPECT_TRUE(res[0].has("agreement leader at 10.78.0.1:")) << "the leader listens on its namespace's link";
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(res[r].has("joined the agreement leader at 10.78.0.1:")) << r;
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i;
    }
  }
}


// Hosts that share no directory (each process has its own /tmp, runtime and cache directories) agree through the
// network rendezvous: ICN_TUNER_RENDEZVOUS=tcp://:port takes the host from MASTER_ADDR as torchrun sets it; here
// that is host B, so a follower's process serves the registry and the leader on host A registers there. Every
// process makes the same choice for every call, and exploring found the winner the synthetic GPUs say (Ring/LL128
// at 4 MiB where NCCL's model picks Ring/Simple).
TEST(TunerCrossHost, HostsWithoutSharedDirectoryAgreeThroughTheRegistry) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(3, 2, 6000);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {kJobKey, "MASTER_ADDR=10.78.0.2", "ICN_TUNER_RENDEZVOUS=tcp://:29517"};
  job.start(0, 0, hosts.ns(0), true, env);
  job.start(1, 1, hosts.ns(1), true, env);
  job.start(2, 2, hosts.ns(1), true, env);
  auto res = job.finish();
  dumpLogs(res);
  ASSERT_NO_FATAL_FAILURE(expectCleanAgreedRun(res, 6000));
  EXPECT_TRUE(res[0].has("agreement leader at 10.78.0.1:")) << "the leader listens on its host's link";
  EXPECT_TRUE(res[0].has("registry 10.78.0.2:29517")) << "the registry's host comes from MASTER_ADDR";
  EXPECT_FALSE(res[0].has("serves the agreement registry")) << "host A does not own 10.78.0.2";
  EXPECT_TRUE(res[1].has("serves the agreement registry") || res[2].has("serves the agreement registry"));
  EXPECT_FALSE(res[1].has("serves the agreement registry") && res[2].has("serves the agreement registry"));
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(res[r].has("joined the agreement leader at 10.78.0.1:")) << r;
  EXPECT_TRUE(res[0].has("every rank's process joined"));
  std::set<std::pair<int, int>> tried;
  for (int i = 0; i < 3000; ++i)
    if (sizeOf(i) == kBig) tried.insert(res[0].picks[i]);
  EXPECT_GE(tried.size(), 4u) << "the fixed plan explored";
  for (int i = 5000; i < 6000; ++i) {
    if (sizeOf(i) == kBig) {
      ASSERT_EQ(res[0].picks[i], std::make_pair(1, 1)) << "call " << i << ": Ring/LL128 at 4 MiB";
    }
  }
}

// The same hosts without a job key: a network address has no file permissions, so nobody there is trusted. Every
// process says so at WARN and keeps NCCL's choice for every call.
TEST(TunerCrossHost, NetworkRendezvousWithoutJobKeyKeepsNcclChoice) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(3, 2, 2500);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {"ICN_TUNER_RENDEZVOUS=tcp://10.78.0.1:29518"};
  job.start(0, 0, hosts.ns(0), true, env);
  job.start(1, 1, hosts.ns(1), true, env);
  job.start(2, 2, hosts.ns(1), true, env);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(res[r].status, 0) << "rank " << r;
    ASSERT_EQ(res[r].picks.size(), 2500u);
    EXPECT_TRUE(res[r].has("WARN ICN tuner: comm")) << r;
    EXPECT_TRUE(res[r].has("needs the job key")) << r;
  }
  expectNcclChoiceEverywhere(res);
}

// Without ICN_TUNER_RENDEZVOUS, hosts that share no directory cannot find each other: the communicator keeps NCCL's
// choice, and the WARN says how to make it agree.
TEST(TunerCrossHost, DefaultRendezvousAcrossHostsKeepsNcclChoiceAndSaysWhy) {
  TwoHosts hosts;
  if (hosts.skip()) GTEST_SKIP() << "cannot create a network namespace (needs root, iproute2)";
  ASSERT_TRUE(hosts.ok()) << "the veth pair could not be set up";
  Job job(2, 2, 2500);
  ASSERT_TRUE(job.ready());
  job.start(0, 0, hosts.ns(0), true);
  job.start(1, 0, hosts.ns(1), true);
  auto res = job.finish();
  dumpLogs(res);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[r].status, 0) << "rank " << r;
    EXPECT_TRUE(res[r].has("no agreement across processes")) << r;
    EXPECT_LE(res[r].maxAnyUs, 3e6) << "rank " << r << ": the wait for START is bounded (1 s)";
  }
  EXPECT_TRUE(res[1].has("ICN_TUNER_RENDEZVOUS=tcp://host:port")) << "the follower's WARN says what would work";
  expectNcclChoiceEverywhere(res);
}

// Something else holds the registry's address: it sends a well-formed challenge, then a welcome it cannot prove
// (it has no job key). Nobody trusts it: every process WARNs, keeps NCCL's choice, and no call waits past the
// START bound.
TEST(TunerMultiproc, HostileRegistryEndsInNcclChoiceWithinTheBound) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(listen(lfd, 64), 0);
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  int port = ntohs(sa.sin_port);
  std::atomic<bool> stop{false};
  std::atomic<int> served{0};
  std::thread hostile([&] {
    auto frame = [](uint8_t type, size_t n, uint8_t fill) {
      std::string f = {'A', 'N', 'C', 'I', static_cast<char>(type), 0, 0, 0, static_cast<char>(n), 0, 0, 0};
      return f + std::string(n, static_cast<char>(fill));
    };
    while (!stop.load()) {
      pollfd p{lfd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept(lfd, nullptr, nullptr);
      if (c < 0) continue;
      std::string ch = frame(1, 16, 7);  // a challenge with a nonce
      (void)!send(c, ch.data(), ch.size(), MSG_NOSIGNAL);  // a process gone by then is no signal to us
      char buf[512];
      pollfd q{c, POLLIN, 0};
      if (poll(&q, 1, 500) > 0) (void)!read(c, buf, sizeof buf);
      std::string wl = frame(3, 32, 0);  // a welcome whose proof is wrong
      (void)!send(c, wl.data(), wl.size(), MSG_NOSIGNAL);
      served.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      close(c);
    }
  });
  Job job(2, 2, 2500);
  ASSERT_TRUE(job.ready());
  std::vector<std::string> env = {kJobKey, "ICN_TUNER_RENDEZVOUS=tcp://127.0.0.1:" + std::to_string(port)};
  job.start(0, 0, "", true, env);
  job.start(1, 0, "", true, env);
  auto res = job.finish();
  stop.store(true);
  hostile.join();
  close(lfd);
  dumpLogs(res);
  EXPECT_GT(served.load(), 0) << "the processes reached the hostile registry";
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[r].status, 0) << "rank " << r;
    ASSERT_EQ(res[r].picks.size(), 2500u);
    EXPECT_TRUE(res[r].has("did not prove the job key")) << r;
    EXPECT_TRUE(res[r].has("no agreement across processes")) << r;
    EXPECT_LE(res[r].maxAnyUs, 3e6) << "rank " << r << ": the wait for START is bounded (1 s)";
  }
  expectNcclChoiceEverywhere(res);
}


int main(int argc, char** argv) {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  g_self = n > 0 ? std::string(self, static_cast<size_t>(n)) : argv[0];
  if (argc >= 13 && std::string(argv[1]) == "--child") {
    ChildArgs a;
    a.rank = atoi(argv[2]);
    a.nRanks = atoi(argv[3]);
    a.nNodes = atoi(argv[4]);
    a.calls = atoi(argv[5]);
    a.view = atoi(argv[6]);
    a.commId = strtoull(argv[7], nullptr, 10);
    a.plugin = argv[8];
    a.shared = argv[9];
    a.out = argv[10];
    a.netns = argv[11];
    a.privateTmp = std::string(argv[12]) == "1";
    return childMain(a);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
