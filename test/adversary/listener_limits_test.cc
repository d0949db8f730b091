// The listener when the process runs out of descriptors (a connection flood, or a job near its `ulimit -n`):
// accept's EMFILE is temporary. One WARN, poll() keeps succeeding, and the waiting connection is taken and
// challenged as soon as a descriptor is free again.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdarg>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/oob.h"
#include "core/params.h"
#include "hostile_peer.h"

namespace icn::adversary {
namespace {

std::vector<std::string> g_warnings;
void captureSink(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != int(LogLevel::Warn)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_warnings.push_back(buf);
}

size_t warningsWith(const std::string& needle) {
  size_t n = 0;
  for (auto& w : g_warnings) n += w.find(needle) != std::string::npos;
  return n;
}

TEST(AdversaryListener, OutOfDescriptorsIsTemporary) {
  setLogSink(&captureSink);
  setenv("ICN_SOCKET_IFNAME", "lo", 1);
  params::reloadForTesting();
  std::array<uint8_t, kHandleSize> handle{};
  std::unique_ptr<OobListener> l;
  ASSERT_EQ(OobListener::open(kTransportUcx, 0x1234, handle, &l), Status::Ok);
  WirePeer client(l->address());
  ASSERT_TRUE(client.ok());
  // No descriptor left for accept(): the limit is set to what is open now.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  int highest = dup(0);
  ASSERT_GE(highest, 0);
  close(highest);
  rlimit tight = old;
  tight.rlim_cur = rlim_t(highest);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::unique_ptr<Handshake> ready;
  Status s1 = l->poll(&ready), s2 = l->poll(&ready);
  size_t pendingWhileOut = l->pendingCount();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(s1, Status::Ok) << "accept's EMFILE failed the listener";
  EXPECT_EQ(s2, Status::Ok);
  EXPECT_EQ(pendingWhileOut, 0u);
  EXPECT_EQ(warningsWith("Too many open files"), 1u) << "expected exactly one WARN for the episode";
  // A descriptor is free again: the waiting connection is accepted and challenged.
  EXPECT_EQ(l->poll(&ready), Status::Ok);
  EXPECT_EQ(l->pendingCount(), 1u);
  EXPECT_TRUE(client.readChallenge().has_value()) << "the connection that waited was never served";
  setLogSink(nullptr);
}

}  // namespace
}  // namespace icn::adversary
