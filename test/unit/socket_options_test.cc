// The liveness options every ICN socket gets (core/socket.h): keepalive probes a tenth of the peer timeout apart,
// the user timeout, and the retransmission backoff capped where the kernel has TCP_RTO_MAX_MS.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "../reliability/log_capture.h"
#include "core/socket.h"

namespace {

constexpr int kTcpRtoMaxMs = 44;  // Linux 6.15+

int tcpOption(int fd, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  if (getsockopt(fd, IPPROTO_TCP, name, &v, &len) != 0) return -1;
  return v;
}

// The kernel's own value for a fresh socket, or -1 where it has no such option.
int kernelRtoMax() {
  icn::Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  return tcpOption(fd.get(), kTcpRtoMaxMs);
}

// A setting for one scope (setEnvAndReload), unset again at its end.
struct Env {
  Env(const char* name, const char* value) : name_(name) { icn::testing::setEnvAndReload(name, value); }
  ~Env() { icn::testing::setEnvAndReload(name_, nullptr); }
  const char* name_;
};

TEST(SocketOptions, KeepaliveProbesATenthOfThePeerTimeoutApart) {
  Env t("ICN_PEER_TIMEOUT_MS", "30000");
  icn::Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  icn::setLivenessOptions(fd.get());
  EXPECT_EQ(tcpOption(fd.get(), TCP_KEEPIDLE), 3);
  EXPECT_EQ(tcpOption(fd.get(), TCP_KEEPINTVL), 3);
  EXPECT_EQ(tcpOption(fd.get(), TCP_USER_TIMEOUT), 30000);
}

TEST(SocketOptions, RetransmissionTimeoutCappedWhereTheKernelCan) {
  if (kernelRtoMax() < 0) GTEST_SKIP() << "this kernel has no TCP_RTO_MAX_MS (Linux 6.15+)";
  icn::Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  icn::setLivenessOptions(fd.get());
  EXPECT_EQ(tcpOption(fd.get(), kTcpRtoMaxMs), 1000);  // the default
  {
    Env cap("ICN_TCP_RTO_MAX_MS", "250");  // under the kernel's floor: raised to it
    icn::Fd low(::socket(AF_INET, SOCK_STREAM, 0));
    icn::setLivenessOptions(low.get());
    EXPECT_EQ(tcpOption(low.get(), kTcpRtoMaxMs), 1000);
  }
  {
    Env cap("ICN_TCP_RTO_MAX_MS", "5000");
    icn::Fd five(::socket(AF_INET, SOCK_STREAM, 0));
    icn::setLivenessOptions(five.get());
    EXPECT_EQ(tcpOption(five.get(), kTcpRtoMaxMs), 5000);
  }
  Env off("ICN_TCP_RTO_MAX_MS", "0");
  icn::Fd kernel(::socket(AF_INET, SOCK_STREAM, 0));
  icn::setLivenessOptions(kernel.get());
  EXPECT_EQ(tcpOption(kernel.get(), kTcpRtoMaxMs), kernelRtoMax());
}

}  // namespace
