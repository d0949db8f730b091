// Authentication between two real processes through the plugin: same key (from the environment or a key
// file) connects and moves data; a wrong key, or a key on one side only, is refused on both sides with a
// WARN naming the peer, quickly (no timeout), while the listener stays healthy (accept never fails).
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <fstream>

#include "ranks.h"

namespace icn::rel {
namespace {

struct AuthCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env0, env1;  // rank 0 accepts, rank 1 connects
  bool connects;
  const char* acceptorWarn;  // expected on the acceptor when refused (nullptr: none required)
};

// Key files are written when the test runs ("@A"/"@B" in a case stand for their paths) and removed after.
struct KeyFiles {
  std::string a = "/tmp/icn-rel-keyA-" + std::to_string(getpid()), b = "/tmp/icn-rel-keyB-" + std::to_string(getpid());
  KeyFiles() {
    std::ofstream(a) << "shared-job-key-A\n";
    std::ofstream(b) << "shared-job-key-B\n";
  }
  ~KeyFiles() {
    unlink(a.c_str());
    unlink(b.c_str());
  }
  void resolve(std::vector<std::pair<std::string, std::string>>* env) const {
    for (auto& [k, v] : *env) v = v == "@A" ? a : v == "@B" ? b : v;
  }
};

// gtest would otherwise print the struct's raw bytes, padding included (valgrind: uninitialised reads).
void PrintTo(const AuthCase& c, std::ostream* os) { *os << c.name; }

class AuthPair : public ::testing::TestWithParam<AuthCase> {};

constexpr auto kRefuseWithin = std::chrono::seconds(15);  // well under ICN_CONNECT_TIMEOUT_MS below

TEST_P(AuthPair, Outcome) {
  const AuthCase& c = GetParam();
  KeyFiles files;
  std::array<RankSetup, 2> setup;
  setup[0].env = c.env0;
  setup[1].env = c.env1;
  files.resolve(&setup[0].env);
  files.resolve(&setup[1].env);
  for (auto& s : setup) s.env.push_back({"ICN_CONNECT_TIMEOUT_MS", "40000"});
  const bool connects = c.connects;
  auto out = runPair(
      [connects](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
        ASSERT_TRUE(r.peer.send(handle, sizeof handle));
        void* rc = nullptr;
        // Accept until a comm appears or the connector reported its outcome (then a little longer).
        auto deadline = netapi::Clock::now() + kRefuseWithin + std::chrono::seconds(5);
        std::optional<netapi::Clock::time_point> peerDone;
        while (!rc && netapi::Clock::now() < deadline) {
          ASSERT_EQ(r.plugin.net->accept(l, &rc, nullptr), ncclSuccess) << "accept must survive a refused peer";
          pollfd p{r.peer.fd(), POLLIN, 0};
          if (!peerDone && poll(&p, 1, 0) == 1) peerDone = netapi::Clock::now();
          if (peerDone && netapi::Clock::now() - *peerDone > std::chrono::milliseconds(1000)) break;
          usleep(1000);
        }
        char verdict = 0;
        ASSERT_TRUE(r.peer.recv(&verdict, 1, std::chrono::seconds(30)));
        if (!connects) {
          EXPECT_EQ(rc, nullptr) << "an unauthenticated peer got a receive comm";
          EXPECT_EQ(verdict, 'R');
        } else {
          ASSERT_NE(rc, nullptr);
          EXPECT_EQ(verdict, 'C');
          uint64_t v[512];
          void* d = v;
          size_t sz = sizeof v;
          int tag = 3;
          void* req = nullptr;
          ASSERT_EQ(r.plugin.net->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
          ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
          EXPECT_EQ(netapi::checkPattern(v, sizeof v, 5), SIZE_MAX);
          ASSERT_TRUE(r.peer.barrier());
          EXPECT_EQ(r.plugin.net->closeRecv(rc), ncclSuccess);
        }
        EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
      },
      [connects](Rank& r) {
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
        void* s = nullptr;
        auto start = netapi::Clock::now();
        ncclResult_t res = netapi::connectBlocking(r.plugin, 0, handle, &s, kRefuseWithin);
        auto took = netapi::Clock::now() - start;
        char verdict = res == ncclSuccess && s ? 'C' : 'R';
        ASSERT_TRUE(r.peer.send(&verdict, 1));
        if (!connects) {
          EXPECT_NE(res, ncclSuccess) << "connected although the keys differ";
          EXPECT_LT(took, kRefuseWithin) << "refusal only by timeout, not by the handshake";
          return;
        }
        ASSERT_EQ(res, ncclSuccess);
        uint64_t v[512];
        netapi::fillPattern(v, sizeof v, 5);
        void* req = nullptr;
        while (!req) ASSERT_EQ(r.plugin.net->isend(s, v, sizeof v, 3, nullptr, nullptr, &req), ncclSuccess);
        ASSERT_EQ(netapi::waitRequest(r.plugin, req, nullptr, kWait), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      },
      setup, std::chrono::seconds(90));
  EXPECT_TRUE(out[0].cleanExit());
  EXPECT_TRUE(out[1].cleanExit());
  if (c.acceptorWarn) {
    // Names the peer (host:pid of the connecting process) and says why.
    EXPECT_TRUE(out[0].warnHas({c.acceptorWarn, ":" + std::to_string(out[1].pid)}))
        << "acceptor did not explain the refusal: " << c.acceptorWarn;
    EXPECT_TRUE(out[1].warnHas({"handshake with"})) << "connector did not report the failed handshake";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Keys, AuthPair,
    ::testing::Values(
        AuthCase{"NoKeys", {}, {}, true, nullptr},
        AuthCase{"SameKey", {{"ICN_AUTH_KEY", "job-key-one-0123456789"}}, {{"ICN_AUTH_KEY", "job-key-one-0123456789"}}, true, nullptr},
        AuthCase{"SameKeyFile", {{"ICN_AUTH_KEY_FILE", "@A"}}, {{"ICN_AUTH_KEY_FILE", "@A"}}, true, nullptr},
        AuthCase{"KeyFileAndEnvSameKey", {{"ICN_AUTH_KEY_FILE", "@A"}}, {{"ICN_AUTH_KEY", "shared-job-key-A"}}, true,
                 nullptr},
        AuthCase{"WrongKey", {{"ICN_AUTH_KEY", "job-key-one-0123456789"}}, {{"ICN_AUTH_KEY", "job-key-two-0123456789"}}, false,
                 "did not prove knowledge of the job key"},
        AuthCase{"WrongKeyFile", {{"ICN_AUTH_KEY_FILE", "@A"}}, {{"ICN_AUTH_KEY_FILE", "@B"}}, false,
                 "did not prove knowledge of the job key"},
        AuthCase{"KeyOnAcceptorOnly", {{"ICN_AUTH_KEY", "job-key-one-0123456789"}}, {}, false, "did not prove knowledge of the job key"},
        AuthCase{"KeyOnConnectorOnly", {}, {{"ICN_AUTH_KEY", "job-key-one-0123456789"}}, false, "ICN_AUTH_KEY is set there but not here"}),
    [](const auto& info) { return std::string(info.param.name); });

// An unusable key (unreadable file, too short) is a configuration error: init succeeds (a failed init would make
// NCCL fall back to its own, unauthenticated transports) and every listen and connect fails with the reason.
TEST(AuthConfig, UnusableKeyFailsListenAndConnect) {
  for (auto kv : std::vector<std::pair<std::string, std::string>>{{"ICN_AUTH_KEY_FILE", "/nonexistent/icn-key"},
                                                                  {"ICN_AUTH_KEY", "short"}}) {
    std::array<RankSetup, 2> setup;
    setup[1].env = {kv};
    auto out = runPair(
        [](Rank& r) {
          char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
          void* l = nullptr;
          ASSERT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, handle, &l), ncclSuccess);
          ASSERT_TRUE(r.peer.send(handle, sizeof handle));
          ASSERT_TRUE(r.peer.barrier());
          EXPECT_EQ(r.plugin.net->closeListen(l), ncclSuccess);
        },
        [](Rank& r) {
          char handle[NCCL_NET_HANDLE_MAXSIZE];
          ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
          char mine[NCCL_NET_HANDLE_MAXSIZE] = {};
          void* l = nullptr;
          EXPECT_EQ(r.plugin.net->listen(r.plugin.ctx, 0, mine, &l), ncclInvalidArgument);
          void* s = nullptr;
          EXPECT_EQ(netapi::connectBlocking(r.plugin, 0, handle, &s, std::chrono::seconds(10)), ncclInvalidArgument);
          EXPECT_EQ(s, nullptr);
          ASSERT_TRUE(r.peer.barrier());
        },
        setup, std::chrono::seconds(60));
    EXPECT_TRUE(out[0].cleanExit());
    EXPECT_TRUE(out[1].cleanExit()) << kv.first << "=" << kv.second;
    const std::string why = kv.first == "ICN_AUTH_KEY" ? "at least 16 are required" : "cannot be read";
    EXPECT_TRUE(out[1].warnHas({"listen refused", why}));
    EXPECT_TRUE(out[1].warnHas({"connect refused", why}));
    EXPECT_FALSE(out[1].logHas("ICN_AUTH_KEY=short")) << "the key reached the log";
  }
}

}  // namespace
}  // namespace icn::rel
