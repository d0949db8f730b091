// The exported ABI: symbol list, version tables, properties, and rejection of bad arguments.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdio>
#include <set>
#include <string>

#include "abi/net_v10.h"
#include "abi/net_v9.h"
#include "two_ranks.h"

namespace icn::conformance {
namespace {

std::set<std::string> exportedSymbols() {
  std::set<std::string> out;
  std::string cmd = "nm -D --defined-only '" + pluginPath() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    char addr[64], type[8], name[400];
    if (sscanf(line, "%63s %7s %399s", addr, type, name) == 3) out.insert(name);
  }
  pclose(p);
  return out;
}

TEST(Abi, ExportsOnlyNcclPluginSymbols) {
  const std::set<std::string> allowed = {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                                         "ncclTunerPlugin_v5", "ncclTunerPlugin_v4", "ncclTunerPlugin_v3",
                                         "ncclTunerPlugin_v2", "ncclProfiler_v5",    "ncclEnvPlugin_v1"};
  auto syms = exportedSymbols();
  ASSERT_FALSE(syms.empty()) << "could not read the dynamic symbol table of " << pluginPath();
  for (const auto& s : syms) EXPECT_TRUE(allowed.count(s)) << "unexpected exported symbol " << s;
  for (const char* required : {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9"})
    EXPECT_TRUE(syms.count(required)) << required << " is not exported";
}

// Each API version's table is complete and its init/devices/properties agree with v11.
TEST(Abi, VersionTablesAgree) {
  runTwoRanks(
      [](Rank& r) {
        const auto* v10 = static_cast<const ncclNet_v10_t*>(dlsym(r.plugin.dl, "ncclNetPlugin_v10"));
        const auto* v9 = static_cast<const ncclNet_v9_t*>(dlsym(r.plugin.dl, "ncclNetPlugin_v9"));
        ASSERT_TRUE(v10 && v9);
        EXPECT_STREQ(r.plugin.net->name, "ICN");
        EXPECT_STREQ(v10->name, "ICN");
        EXPECT_STREQ(v9->name, "ICN");
        const void* const* fns11 = reinterpret_cast<const void* const*>(&r.plugin.net->init);
        for (int i = 0; i < 21; i++) EXPECT_NE(fns11[i], nullptr) << "v11 function " << i << " is null";
        const void* const* fns10 = reinterpret_cast<const void* const*>(&v10->init);
        for (int i = 0; i < 19; i++) EXPECT_NE(fns10[i], nullptr) << "v10 function " << i << " is null";
        int n11 = 0, n10 = 0, n9 = 0;
        ASSERT_EQ(r.plugin.net->devices(&n11), ncclSuccess);
        ASSERT_EQ(v10->init(nullptr, nullptr), ncclSuccess);
        ASSERT_EQ(v10->devices(&n10), ncclSuccess);
        ASSERT_EQ(v9->init(nullptr), ncclSuccess);
        ASSERT_EQ(v9->devices(&n9), ncclSuccess);
        EXPECT_GE(n11, 1);
        EXPECT_EQ(n11, n10);
        EXPECT_EQ(n11, n9);
        ncclNetProperties_v11_t p11{};
        ncclNetProperties_v9_t p9{};
        ASSERT_EQ(r.plugin.net->getProperties(0, &p11), ncclSuccess);
        ASSERT_EQ(v9->getProperties(0, &p9), ncclSuccess);
        ASSERT_NE(p11.name, nullptr);
        EXPECT_STREQ(p11.name, p9.name);
        EXPECT_GT(p11.speed, 0);
        EXPECT_EQ(p11.maxRecvs, 8);
        EXPECT_TRUE(p11.ptrSupport & NCCL_PTR_HOST);
        EXPECT_GE(p11.maxComms, 1024);
        EXPECT_EQ(p11.netDeviceType, NCCL_NET_DEVICE_HOST);
        EXPECT_EQ(p11.vProps.ndevs, 1);
        EXPECT_GT(p11.maxP2pBytes, 0u);
        EXPECT_EQ(p9.speed, p11.speed);
      },
      [](Rank&) {});
}

TEST(Abi, BadArgumentsAreRejected) {
  runTwoRanks(
      [](Rank& r) {
        const ncclNet_v11_t* n = r.plugin.net;
        ncclNetProperties_v11_t props;
        EXPECT_EQ(n->getProperties(99, &props), ncclInvalidArgument);
        EXPECT_EQ(n->getProperties(-1, &props), ncclInvalidArgument);
        EXPECT_NE(n->getProperties(0, nullptr), ncclSuccess);
        EXPECT_NE(n->devices(nullptr), ncclSuccess);
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        EXPECT_NE(n->listen(r.plugin.ctx, 99, handle, &l), ncclSuccess);
        EXPECT_NE(n->listen(r.plugin.ctx, 0, nullptr, &l), ncclSuccess);
        // A handle that no listen() produced (garbage, zeros) is refused, not dereferenced.
        void* s = nullptr;
        ncclNetDeviceHandle_v11_t* dh = nullptr;
        char garbage[NCCL_NET_HANDLE_MAXSIZE];
        for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = static_cast<char>(i * 37 + 11);
        EXPECT_EQ(n->connect(r.plugin.ctx, 0, garbage, &s, &dh), ncclInvalidArgument);
        memset(garbage, 0, sizeof garbage);
        EXPECT_EQ(n->connect(r.plugin.ctx, 0, garbage, &s, &dh), ncclInvalidArgument);
        EXPECT_EQ(s, nullptr);
        int done = 0;
        EXPECT_NE(n->test(nullptr, &done, nullptr), ncclSuccess);
        // Real comms, then malformed data-path calls on them.
        void *rc = nullptr;
        r.connectPair(&s, &rc);
        void* req = nullptr;
        char buf[16];
        void* d[9] = {buf, buf, buf, buf, buf, buf, buf, buf, buf};
        size_t sz[9] = {16, 16, 16, 16, 16, 16, 16, 16, 16};
        int tags[9] = {};
        EXPECT_EQ(n->irecv(rc, 0, d, sz, tags, nullptr, nullptr, &req), ncclInvalidArgument);
        EXPECT_EQ(n->irecv(rc, 9, d, sz, tags, nullptr, nullptr, &req), ncclInvalidArgument);
        EXPECT_EQ(n->irecv(rc, 1, nullptr, sz, tags, nullptr, nullptr, &req), ncclInvalidArgument);
        EXPECT_NE(n->irecv(rc, 1, d, sz, tags, nullptr, nullptr, nullptr), ncclSuccess);
        void* mh = nullptr;
        EXPECT_NE(n->regMr(rc, buf, sizeof buf, NCCL_PTR_HOST, nullptr), ncclSuccess);
        EXPECT_EQ(n->regMr(rc, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclSuccess);
        EXPECT_EQ(n->deregMr(rc, mh), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(n->closeRecv(rc), ncclSuccess);
      },
      [](Rank& r) {
        void *s = nullptr, *rc = nullptr;
        r.connectPair(&s, &rc);
        void* req = nullptr;
        EXPECT_EQ(r.plugin.net->isend(s, nullptr, 100, 0, nullptr, nullptr, &req), ncclInvalidArgument);
        EXPECT_NE(r.plugin.net->isend(s, nullptr, 0, 0, nullptr, nullptr, nullptr), ncclSuccess);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(r.plugin.net->closeSend(s), ncclSuccess);
      });
}

// A rank that set up nothing and finalizes: init failure paths hand NCCL a NULL ctx to finalize.
TEST(Abi, FinalizeAcceptsNullContext) {
  runTwoRanks([](Rank& r) { EXPECT_EQ(r.plugin.net->finalize(nullptr), ncclSuccess); }, [](Rank&) {});
}

}  // namespace
}  // namespace icn::conformance
