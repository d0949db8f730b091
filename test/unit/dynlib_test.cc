// The run-time loaders of libibverbs and UCX: the reasons they give when a library or symbol is missing, and
// that the real libraries on this machine resolve every function the transports call.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/dynlib.h"
#if ICN_TEST_IB
#include "transport/ib/ib_transport.h"
#include "transport/ib/ib_verbs_lib.h"
#endif
#if ICN_TEST_UCX
#include "transport/ucx/ucx_lib.h"
#include "transport/ucx/ucx_transport.h"
#endif

using icn::dynlib::Library;

namespace {
// A table of function pointers, every entry non-null.
template <typename Table>
bool allResolved(const Table& t) {
  static_assert(sizeof(Table) % sizeof(void (*)()) == 0);
  void (*entries[sizeof(Table) / sizeof(void (*)())])();
  memcpy(entries, &t, sizeof t);
  for (auto* e : entries)
    if (!e) return false;
  return true;
}
}  // namespace

TEST(DynLib, MissingLibraryIsNamedPlainly) {
  Library l;
  std::string why;
  EXPECT_FALSE(l.open("libicn-absent-for-test.so.7", &why));
  EXPECT_EQ(why, "libicn-absent-for-test.so.7 not found");
}

TEST(DynLib, UnloadableFileKeepsTheLoadersWords) {
  char path[] = "/tmp/icn-dynlib-XXXXXX.so";
  int fd = mkstemps(path, 3);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not an ELF file at all, long enough to be read as a header......", 64), 64);
  close(fd);
  Library l;
  std::string why;
  EXPECT_FALSE(l.open(path, &why));
  unlink(path);
  EXPECT_NE(why.find(path), std::string::npos) << why;
  EXPECT_EQ(why.find("not found"), std::string::npos) << why;
}

TEST(DynLib, MissingSymbolAndVersionAreNamed) {
  Library l;
  std::string why;
  ASSERT_TRUE(l.open("libc.so.6", &why)) << why;
  pid_t (*fn)() = nullptr;
  EXPECT_FALSE(l.resolve(&fn, "icn_no_such_function", nullptr, &why));
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(why, "libc.so.6 lacks icn_no_such_function");
  EXPECT_FALSE(l.resolve(&fn, "getpid", "GLIBC_9.99", &why));
  EXPECT_EQ(why, "libc.so.6 lacks getpid@GLIBC_9.99");
  ASSERT_TRUE(l.resolve(&fn, "getpid", "GLIBC_2.2.5", &why));
  EXPECT_EQ(fn(), getpid());
}

#if ICN_TEST_IB
TEST(DynLib, VerbsTableResolvesOnThisHost) {
  std::string why;
  const icn::ib::VerbsApi* v = icn::ib::loadVerbs(&why);
  ASSERT_NE(v, nullptr) << why;
  EXPECT_TRUE(icn::ib::libraryAvailable(&why));
  // Every entry resolved (a member added to the table but not to the loader would stay null); rdma-core
  // 34+ (Debian 12 has 44) also has the optional dma-buf registration.
  EXPECT_TRUE(allResolved(*v));
  EXPECT_NE(v->reg_dmabuf_mr, nullptr);
}
#endif

#if ICN_TEST_UCX
TEST(DynLib, UcxTableResolvesOnThisHost) {
  std::string why, version;
  ASSERT_TRUE(icn::ucx::libraryAvailable(&why, &version)) << why;
  unsigned major = 0, minor = 0, release = 0;
  icn::ucx::ucx().get_version(&major, &minor, &release);
  EXPECT_EQ(version, std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release));
  EXPECT_TRUE(allResolved(icn::ucx::ucx()));
  EXPECT_GE(major * 100 + minor, 109u);  // the *_nbx calls the transport uses appeared in UCX 1.9
  EXPECT_STREQ(icn::ucx::ucx().status_string(UCS_ERR_NO_MEMORY), "Out of memory");
}
#endif
