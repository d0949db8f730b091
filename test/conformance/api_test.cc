// The exported ABI: symbol list, version tables, properties, and rejection of bad arguments.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <set>
#include <string>

#include "abi/net_v10.h"
#include "abi/net_v12.h"
#include "abi/net_v9.h"
#include "../tuner/nccl_log.h"
#include "icn_exports.h"
#include "pair_runner.h"
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
  // plugin/export/exports.txt: every version NCCL 2.24-2.30 may look up; the env plugin is its own library (shim/).
  const std::set<std::string> allowed(std::begin(kIcnExportedSymbols), std::end(kIcnExportedSymbols));
  ASSERT_GE(allowed.size(), 3u) << "the generated export list is short";
  auto syms = exportedSymbols();
  ASSERT_FALSE(syms.empty()) << "could not read the dynamic symbol table of " << pluginPath();
  for (const auto& s : syms) EXPECT_TRUE(allowed.count(s)) << "unexpected exported symbol " << s;
  for (const auto& required : allowed)
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

// Net v12 (NCCL 2.30+): v11's properties plus rail/plane ids, with a per-comm context like v11's. Over UCX every
// device is rail 0; planes are unknown (-1).
TEST(Abi, NetV12AgreesWithV11AndReportsRails) {
  runTwoRanks(
      [](Rank& r) {
        const auto* v12 = static_cast<const ncclNet_v12_t*>(dlsym(r.plugin.dl, "ncclNetPlugin_v12"));
        ASSERT_NE(v12, nullptr);
        EXPECT_STREQ(v12->name, "ICN");
        const void* const* fns = reinterpret_cast<const void* const*>(&v12->init);
        for (int i = 0; i < 21; i++) EXPECT_NE(fns[i], nullptr) << "v12 function " << i << " is null";
        void* ctx = nullptr;
        ncclNetCommConfig_v12_t cfg{5};
        ASSERT_EQ(v12->init(&ctx, 0x1234, &cfg, nullptr, nullptr), ncclSuccess);
        ASSERT_NE(ctx, nullptr);
        int n12 = 0, n11 = 0;
        ASSERT_EQ(v12->devices(&n12), ncclSuccess);
        ASSERT_EQ(r.plugin.net->devices(&n11), ncclSuccess);
        EXPECT_EQ(n12, n11);
        for (int d = 0; d < n12; ++d) {
          ncclNetProperties_v12_t p12;
          memset(&p12, 0xab, sizeof p12);  // every field must be written
          ncclNetProperties_v11_t p11{};
          ASSERT_EQ(v12->getProperties(d, &p12), ncclSuccess);
          ASSERT_EQ(r.plugin.net->getProperties(d, &p11), ncclSuccess);
          EXPECT_STREQ(p12.name, p11.name);
          EXPECT_EQ(p12.guid, p11.guid);
          EXPECT_EQ(p12.speed, p11.speed);
          EXPECT_EQ(p12.ptrSupport, p11.ptrSupport);
          EXPECT_EQ(p12.maxRecvs, p11.maxRecvs);
          EXPECT_EQ(p12.maxComms, p11.maxComms);
          EXPECT_EQ(p12.maxP2pBytes, p11.maxP2pBytes);
          EXPECT_EQ(p12.maxCollBytes, p11.maxCollBytes);
          EXPECT_EQ(p12.maxMultiRequestSize, 1);
          EXPECT_EQ(p12.vProps.ndevs, p11.vProps.ndevs);
          EXPECT_EQ(p12.vProps.devs[0], p11.vProps.devs[0]);
          EXPECT_EQ(p12.railId, 0) << "UCX devices share one rail";
          EXPECT_EQ(p12.planeId, NCCL_NET_ID_UNDEF);
        }
        ncclNetProperties_v12_t bad{};
        EXPECT_NE(v12->getProperties(n12, &bad), ncclSuccess);
        ncclNetVDeviceProps_v12_t nine{};
        nine.ndevs = 9;
        int vd = -1;
        EXPECT_NE(v12->makeVDevice(&vd, &nine), ncclSuccess);
        ncclNetAttr_v12_t attr{};
        EXPECT_EQ(v12->setNetAttr(ctx, &attr), ncclSuccess);
        EXPECT_EQ(v12->finalize(ctx), ncclSuccess);
        EXPECT_EQ(v12->finalize(nullptr), ncclSuccess);  // NCCL finalizes after a failed init too
      },
      [](Rank&) {});
}

// What a v12 init's context carries is visible on the wire: a connection made through a context for communicator
// 0x1234 reaches a listener of 0x1234 and moves data; one from a context for another communicator is refused by
// the listener, with a WARN naming both, and the good connection is unaffected.
TEST(Abi, NetV12ContextCarriesItsCommunicator) {
  auto v12of = [](Rank& r) { return static_cast<const ncclNet_v12_t*>(dlsym(r.plugin.dl, "ncclNetPlugin_v12")); };
  auto out = testpair::runPair(
      [&](Rank& r) {
        const ncclNet_v12_t* v12 = v12of(r);
        ASSERT_NE(v12, nullptr);
        void* ctx = nullptr;
        ncclNetCommConfig_v12_t cfg{-1};
        ASSERT_EQ(v12->init(&ctx, 0x1234, &cfg, nullptr, nullptr), ncclSuccess);
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* l = nullptr;
        ASSERT_EQ(v12->listen(ctx, 0, handle, &l), ncclSuccess);
        ASSERT_TRUE(r.peer.send(handle, sizeof handle));
        // The refused connection never comes out of accept(); the good one (sent after it) does.
        void* rc = nullptr;
        ncclNetDeviceHandle_v12_t* dh = nullptr;
        auto deadline = netapi::Clock::now() + kWait;
        while (!rc) {
          ASSERT_EQ(v12->accept(l, &rc, &dh), ncclSuccess);
          ASSERT_LT(netapi::Clock::now(), deadline);
        }
        uint64_t got = 0;
        void* d = &got;
        size_t sz = sizeof got;
        int tag = 3;
        void* req = nullptr;
        ASSERT_EQ(v12->irecv(rc, 1, &d, &sz, &tag, nullptr, nullptr, &req), ncclSuccess);
        int done = 0;
        while (!done) {
          ASSERT_EQ(v12->test(req, &done, nullptr), ncclSuccess);
          ASSERT_LT(netapi::Clock::now(), deadline);
        }
        EXPECT_EQ(got, 0x1234abcdull);
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(v12->closeRecv(rc), ncclSuccess);
        EXPECT_EQ(v12->closeListen(l), ncclSuccess);
        EXPECT_EQ(v12->finalize(ctx), ncclSuccess);
      },
      [&](Rank& r) {
        const ncclNet_v12_t* v12 = v12of(r);
        ASSERT_NE(v12, nullptr);
        void *good = nullptr, *other = nullptr;
        ncclNetCommConfig_v12_t cfg{-1};
        ASSERT_EQ(v12->init(&good, 0x1234, &cfg, nullptr, nullptr), ncclSuccess);
        ASSERT_EQ(v12->init(&other, 0x5678, &cfg, nullptr, nullptr), ncclSuccess);
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        ASSERT_TRUE(r.peer.recv(handle, sizeof handle));
        auto connect = [&](void* ctx, void** s) {
          char copy[NCCL_NET_HANDLE_MAXSIZE];
          memcpy(copy, handle, sizeof copy);
          ncclNetDeviceHandle_v12_t* dh = nullptr;
          auto deadline = netapi::Clock::now() + kWait;
          ncclResult_t res = ncclSuccess;
          while (!*s && (res = v12->connect(ctx, 0, copy, s, &dh)) == ncclSuccess && netapi::Clock::now() < deadline) {
          }
          return res;
        };
        void* refused = nullptr;
        EXPECT_NE(connect(other, &refused), ncclSuccess) << "a connection for another communicator was accepted";
        EXPECT_EQ(refused, nullptr);
        void* s = nullptr;
        ASSERT_EQ(connect(good, &s), ncclSuccess);
        ASSERT_NE(s, nullptr);
        uint64_t v = 0x1234abcdull;
        void* req = nullptr;
        while (!req) ASSERT_EQ(v12->isend(s, &v, sizeof v, 3, nullptr, nullptr, &req), ncclSuccess);
        int done = 0;
        auto deadline = netapi::Clock::now() + kWait;
        while (!done) {
          ASSERT_EQ(v12->test(req, &done, nullptr), ncclSuccess);
          ASSERT_LT(netapi::Clock::now(), deadline);
        }
        ASSERT_TRUE(r.peer.barrier());
        EXPECT_EQ(v12->closeSend(s), ncclSuccess);
        EXPECT_EQ(v12->finalize(other), ncclSuccess);
        EXPECT_EQ(v12->finalize(good), ncclSuccess);
      });
  EXPECT_TRUE(out[0].cleanExit());
  EXPECT_TRUE(out[1].cleanExit());
  EXPECT_TRUE(out[0].warnHas({"communicator 0x5678", "0x1234", "refused"}))
      << "the listener did not name the foreign communicator";
}

namespace {
using icn::testing::ncclLogged;
using icn::testing::ncclLogger;
using icn::testing::ncclLogText;

int countFds() { return testpair::openFds(); }
}  // namespace

// makeVDevice of the verbs transport through the C ABI (net v12), in a process of its own with
// ICN_TRANSPORT=ib. With RDMA devices (the Soft-RoCE VM has two): two fuse into a third device whose properties
// add up, and a device listed twice is refused. Without any: init fails with the transport's reason, makeVDevice
// is refused as a call before a successful init, and no descriptor is left behind.
TEST(Abi, IbMakeVDeviceThroughTheCAbi) {
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("ICN_TRANSPORT", "ib", 1);
    unsetenv("ICN_IB_HCA");  // every device of the host
    netapi::Plugin p;
    std::string err;
    if (!p.load(pluginPath(), &err)) {
      fprintf(stderr, "cannot load %s: %s\n", pluginPath().c_str(), err.c_str());
      _exit(3);
    }
    const auto* v12 = static_cast<const ncclNet_v12_t*>(dlsym(p.dl, "ncclNetPlugin_v12"));
    if (!v12) _exit(3);
    const int fdsBefore = countFds();
    void* ctx = nullptr;
    ncclNetCommConfig_v12_t cfg{-1};
    ncclResult_t init = v12->init(&ctx, 0x77, &cfg, ncclLogger, nullptr);
    ncclNetVDeviceProps_v12_t two{};
    int vd = -1;
    if (init != ncclSuccess) {
      EXPECT_EQ(init, ncclSystemError) << "init without RDMA devices";
      EXPECT_EQ(ctx, nullptr);
      EXPECT_TRUE(ncclLogged("ICN_TRANSPORT=ib but the verbs transport is unusable")) << ncclLogText();
      two.ndevs = 2;
      two.devs[0] = 0;
      two.devs[1] = 1;
      EXPECT_EQ(v12->makeVDevice(&vd, &two), ncclInvalidUsage);
      EXPECT_EQ(vd, -1);
      EXPECT_TRUE(ncclLogged("called before a successful init")) << ncclLogText();
      EXPECT_EQ(v12->finalize(nullptr), ncclSuccess);
      EXPECT_EQ(countFds(), fdsBefore) << "descriptors left open by a failed init";
      printf("ib makeVDevice: no RDMA device here; init %d, makeVDevice %d, %d fds before and after\n", init,
             ncclInvalidUsage, fdsBefore);
    } else {
      int n = 0;
      EXPECT_EQ(v12->devices(&n), ncclSuccess);
      ASSERT_GE(n, 1);
      two.ndevs = 2;
      two.devs[0] = 0;
      two.devs[1] = 0;
      EXPECT_EQ(v12->makeVDevice(&vd, &two), ncclInvalidArgument) << "a device listed twice";
      if (n >= 2) {
        two.devs[1] = 1;
        ASSERT_EQ(v12->makeVDevice(&vd, &two), ncclSuccess);
        EXPECT_EQ(vd, n);
        int n2 = 0;
        EXPECT_EQ(v12->devices(&n2), ncclSuccess);
        EXPECT_EQ(n2, n + 1);
        ncclNetProperties_v12_t a{}, b{}, f{};
        ASSERT_EQ(v12->getProperties(0, &a), ncclSuccess);
        ASSERT_EQ(v12->getProperties(1, &b), ncclSuccess);
        ASSERT_EQ(v12->getProperties(vd, &f), ncclSuccess);
        EXPECT_EQ(std::string(f.name), std::string(a.name) + "+" + b.name);
        EXPECT_EQ(f.speed, a.speed + b.speed);
        EXPECT_EQ(f.vProps.ndevs, 2);
        EXPECT_EQ(f.vProps.devs[0], 0);
        EXPECT_EQ(f.vProps.devs[1], 1);
        printf("ib makeVDevice: %s (%d Mbps) as device %d\n", f.name, f.speed, vd);
      }
      EXPECT_EQ(v12->finalize(ctx), ncclSuccess);
    }
    fflush(stdout);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the ICN_TRANSPORT=ib process failed (status " << st << ")";
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
