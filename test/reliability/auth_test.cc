// Job-key loading (ICN_AUTH_KEY, ICN_AUTH_KEY_FILE) and MAC verification; and the listen socket binding
// to the chosen interface only, unless ICN_SOCKET_BIND_ANY asks for every address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <fstream>

#include "core/auth.h"
#include "core/oob.h"
#include "log_capture.h"

namespace icn {
namespace {

using testing::setEnvAndReload;

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::installLogCapture();
    setEnvAndReload("ICN_AUTH_KEY", nullptr);
    setEnvAndReload("ICN_AUTH_KEY_FILE", nullptr);
    testing::takeWarnings();
  }
  void TearDown() override { SetUp(); }
  std::string writeFile(const std::string& content) {
    std::string path = ::testing::TempDir() + "icn-key-" + std::to_string(getpid()) + "-" + std::to_string(n_++);
    std::ofstream(path, std::ios::binary) << content;
    files_.push_back(path);
    return path;
  }
  ~AuthTest() override {
    for (auto& f : files_) unlink(f.c_str());
  }
  std::array<uint8_t, 16> nc{1, 2, 3}, na{4, 5, 6};
  int n_ = 0;
  std::vector<std::string> files_;
};

TEST_F(AuthTest, OffByDefault) {
  EXPECT_EQ(auth::init(), Status::Ok);
  EXPECT_FALSE(auth::enabled());
  EXPECT_TRUE(auth::mac('C', nc, na).empty());
  EXPECT_TRUE(auth::verify('C', nc, na, {}));
  std::vector<uint8_t> some(32, 0);
  EXPECT_FALSE(auth::verify('C', nc, na, some)) << "a MAC where none is expected must not verify";
}

TEST_F(AuthTest, KeyFromEnvironment) {
  setEnvAndReload("ICN_AUTH_KEY", "secret");
  ASSERT_TRUE(auth::enabled());
  auto m = auth::mac('C', nc, na);
  ASSERT_EQ(m.size(), 32u);
  EXPECT_TRUE(auth::verify('C', nc, na, m));
  EXPECT_FALSE(auth::verify('A', nc, na, m)) << "role is bound into the MAC";
  EXPECT_FALSE(auth::verify('C', na, nc, m)) << "nonce order is bound into the MAC";
  for (size_t i = 0; i < m.size(); i++) {
    auto flipped = m;
    flipped[i] ^= 0x01;
    EXPECT_FALSE(auth::verify('C', nc, na, flipped)) << "bit flip at byte " << i;
  }
  EXPECT_FALSE(auth::verify('C', nc, na, std::span<const uint8_t>(m.data(), 31)));
  EXPECT_FALSE(auth::verify('C', nc, na, {}));
}

TEST_F(AuthTest, KeyFileMatchesEnvironmentKey) {
  setEnvAndReload("ICN_AUTH_KEY", "file-secret");
  auto fromEnv = auth::mac('C', nc, na);
  setEnvAndReload("ICN_AUTH_KEY", nullptr);
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("file-secret\n").c_str());  // trailing newline ignored
  ASSERT_EQ(auth::init(), Status::Ok);
  ASSERT_TRUE(auth::enabled());
  EXPECT_EQ(auth::mac('C', nc, na), fromEnv);
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("other-secret").c_str());
  EXPECT_NE(auth::mac('C', nc, na), fromEnv);
}

TEST_F(AuthTest, UnreadableOrEmptyKeyFileIsAnErrorNotSilentlyOff) {
  setEnvAndReload("ICN_AUTH_KEY_FILE", "/nonexistent/icn/key");
  EXPECT_EQ(auth::init(), Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"ICN_AUTH_KEY_FILE", "cannot be read"}));
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("\n").c_str());
  EXPECT_EQ(auth::init(), Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"is empty"}));
}

TEST_F(AuthTest, NoncesAreFresh) {
  std::array<uint8_t, 16> a{}, b{};
  auth::fillNonce(a);
  auth::fillNonce(b);
  EXPECT_NE(a, b);
  EXPECT_NE(a, (std::array<uint8_t, 16>{}));
}

// ---- bind address -----------------------------------------------------------------------------------

// Non-blocking connect to addr; true when it is accepted by the kernel within 1 s.
bool canConnect(const char* ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &sa.sin_addr);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 1000) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      ok = err == 0;
    }
  }
  close(fd);
  return ok;
}

int listenPort(const OobListener& l) { return ntohs(reinterpret_cast<const sockaddr_in*>(&l.address().storage)->sin_port); }

TEST_F(AuthTest, ListenSocketBindsToChosenInterfaceOnly) {
  setEnvAndReload("ICN_SOCKET_IFNAME", "lo");
  std::array<uint8_t, kHandleSize> handle{};
  std::unique_ptr<OobListener> l;
  ASSERT_EQ(OobListener::open(kTransportUcx, 1, handle, &l), Status::Ok);
  EXPECT_EQ(l->address().str().rfind("127.0.0.1:", 0), 0u) << l->address().str();
  int port = listenPort(*l);
  EXPECT_TRUE(canConnect("127.0.0.1", port));
  // 127.0.0.2 is also the loopback interface: only a wildcard bind would answer there.
  EXPECT_FALSE(canConnect("127.0.0.2", port)) << "the listen socket answers on an address it was not bound to";

  setEnvAndReload("ICN_SOCKET_BIND_ANY", "1");
  std::unique_ptr<OobListener> any;
  ASSERT_EQ(OobListener::open(kTransportUcx, 1, handle, &any), Status::Ok);
  EXPECT_EQ(any->address().str().rfind("127.0.0.1:", 0), 0u) << "advertises the interface address, not 0.0.0.0";
  EXPECT_TRUE(canConnect("127.0.0.2", listenPort(*any)));
  setEnvAndReload("ICN_SOCKET_BIND_ANY", nullptr);
  setEnvAndReload("ICN_SOCKET_IFNAME", nullptr);
}

}  // namespace
}  // namespace icn
