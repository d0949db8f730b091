// Job-key loading (ICN_AUTH_KEY, ICN_AUTH_KEY_FILE) and MAC verification; and the listen socket binding
// to the chosen interface only, unless ICN_SOCKET_BIND_ANY asks for every address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <fstream>

#include "core/auth.h"
#include "core/oob.h"
#include "core/params.h"
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
  static constexpr const char* kKey = "auth-test-job-key-0123456789";
  std::vector<uint8_t> msg = proofMessage('C', std::vector<uint8_t>(16, 1), std::vector<uint8_t>(32, 2));
  int n_ = 0;
  std::vector<std::string> files_;
};

TEST_F(AuthTest, OffByDefault) {
  EXPECT_EQ(auth::init(), Status::Ok);
  EXPECT_FALSE(auth::enabled());
  EXPECT_EQ(auth::tag(msg), sha256(msg)) << "without a key the tag is a plain SHA-256";
  EXPECT_TRUE(auth::verifyTag(msg, sha256(msg)));
}

TEST_F(AuthTest, TagIsHmacAndVerifiesOnlyItself) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  ASSERT_TRUE(auth::enabled());
  Digest t = auth::tag(msg);
  EXPECT_EQ(t, hmacSha256({reinterpret_cast<const uint8_t*>(kKey), strlen(kKey)}, msg));
  EXPECT_TRUE(auth::verifyTag(msg, t));
  EXPECT_FALSE(auth::verifyTag(msg, sha256(msg))) << "an unkeyed tag must not pass a keyed check";
  for (size_t i = 0; i < t.size(); i++) {
    auto flipped = t;
    flipped[i] ^= 0x01;
    EXPECT_FALSE(auth::verifyTag(msg, flipped)) << "bit flip at byte " << i;
  }
  auto other = msg;
  other.back() ^= 1;
  EXPECT_FALSE(auth::verifyTag(other, t)) << "the tag covers every byte of the message";
  EXPECT_FALSE(auth::verifyTag(msg, std::span<const uint8_t>(t.data(), 31)));
  EXPECT_FALSE(auth::verifyTag(msg, {}));
}

TEST_F(AuthTest, KeyFileMatchesEnvironmentKey) {
  setEnvAndReload("ICN_AUTH_KEY", "file-secret-0123456789");
  auto fromEnv = auth::tag(msg);
  setEnvAndReload("ICN_AUTH_KEY", nullptr);
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("file-secret-0123456789\n").c_str());  // trailing newline ignored
  ASSERT_EQ(auth::init(), Status::Ok);
  ASSERT_TRUE(auth::enabled());
  EXPECT_EQ(auth::tag(msg), fromEnv);
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("other-secret-0123456789").c_str());
  EXPECT_NE(auth::tag(msg), fromEnv);
}

TEST_F(AuthTest, UnreadableOrEmptyKeyFileIsAnErrorNotSilentlyOff) {
  setEnvAndReload("ICN_AUTH_KEY_FILE", "/nonexistent/icn/key");
  EXPECT_EQ(auth::init(), Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"ICN_AUTH_KEY_FILE", "cannot be read"}));
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("\n").c_str());
  EXPECT_EQ(auth::init(), Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"is empty"}));
}

// A short key is refused with the reason, and so is every listen and connect (never silently unauthenticated).
TEST_F(AuthTest, ShortKeyIsRefusedAndBlocksListenAndConnect) {
  setEnvAndReload("ICN_AUTH_KEY", "k1");
  EXPECT_EQ(auth::init(), Status::InvalidArgument);
  EXPECT_FALSE(auth::enabled());
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"ICN_AUTH_KEY holds 2 bytes; at least 16 are required"}));
  std::array<uint8_t, kHandleSize> handle{};
  std::unique_ptr<OobListener> l;
  EXPECT_EQ(OobListener::open(kTransportUcx, 1, 1, handle, &l), Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"listen refused", "at least 16 are required"}));
  std::unique_ptr<OobConnector> c;
  EXPECT_EQ(OobConnector::start(handle, kTransportUcx, makeLocalHello(kTransportUcx, 1, {}), &c),
            Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"connect refused", "at least 16 are required"}));
  setEnvAndReload("ICN_AUTH_KEY", nullptr);
  setEnvAndReload("ICN_AUTH_KEY_FILE", writeFile("fifteen-bytes!!").c_str());
  EXPECT_EQ(auth::init(), Status::InvalidArgument);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"ICN_AUTH_KEY_FILE holds 15 bytes"}));
}

TEST_F(AuthTest, KeyFileReadableByOthersIsWarnedAbout) {
  std::string f = writeFile("a-long-enough-job-key-0123456789");
  ASSERT_EQ(chmod(f.c_str(), 0644), 0);
  setEnvAndReload("ICN_AUTH_KEY_FILE", f.c_str());
  EXPECT_EQ(auth::init(), Status::Ok);
  EXPECT_TRUE(auth::enabled());
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"is accessible by group or others (mode 0644)", "chmod 600"}));
  ASSERT_EQ(chmod(f.c_str(), 0600), 0);
  setEnvAndReload("ICN_AUTH_KEY_FILE", f.c_str());
  EXPECT_EQ(auth::init(), Status::Ok);
  EXPECT_FALSE(testing::warned(testing::takeWarnings(), {"accessible by group or others"}));
}

// The key never reaches a log: the settings dump and icn-params show its length only.
TEST_F(AuthTest, KeyIsNeverShown) {
  setEnvAndReload("ICN_AUTH_KEY", kKey);
  EXPECT_EQ(params::displayValue(params::Id::AuthKey), "<set, " + std::to_string(strlen(kKey)) + " bytes>");
  EXPECT_EQ(params::displayValue(params::Id::AuthKeyFile), "");
  ASSERT_EQ(auth::init(), Status::Ok);
  for (auto& w : testing::takeWarnings()) EXPECT_EQ(w.find(kKey), std::string::npos) << w;
  setEnvAndReload("ICN_AUTH_KEY", nullptr);
  EXPECT_EQ(params::displayValue(params::Id::AuthKey), "");
}

TEST_F(AuthTest, NoncesAreFreshOrRefused) {
  std::array<uint8_t, 16> a{}, b{};
  EXPECT_EQ(auth::fillNonce(a), Status::Ok);
  EXPECT_EQ(auth::fillNonce(b), Status::Ok);
  EXPECT_NE(a, b);
  EXPECT_NE(a, (std::array<uint8_t, 16>{}));
  auth::failRandomForTesting(true);
  EXPECT_EQ(auth::fillNonce(a), Status::SystemError);
  auth::failRandomForTesting(false);
  EXPECT_TRUE(testing::warned(testing::takeWarnings(), {"no random bytes for a handshake nonce"}));
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
  ASSERT_EQ(OobListener::open(kTransportUcx, 1, 1, handle, &l), Status::Ok);
  EXPECT_EQ(l->address().str().rfind("127.0.0.1:", 0), 0u) << l->address().str();
  int port = listenPort(*l);
  EXPECT_TRUE(canConnect("127.0.0.1", port));
  // 127.0.0.2 is also the loopback interface: only a wildcard bind would answer there.
  EXPECT_FALSE(canConnect("127.0.0.2", port)) << "the listen socket answers on an address it was not bound to";

  setEnvAndReload("ICN_SOCKET_BIND_ANY", "1");
  std::unique_ptr<OobListener> any;
  ASSERT_EQ(OobListener::open(kTransportUcx, 1, 1, handle, &any), Status::Ok);
  EXPECT_EQ(any->address().str().rfind("127.0.0.1:", 0), 0u) << "advertises the interface address, not 0.0.0.0";
  EXPECT_TRUE(canConnect("127.0.0.2", listenPort(*any)));
  setEnvAndReload("ICN_SOCKET_BIND_ANY", nullptr);
  setEnvAndReload("ICN_SOCKET_IFNAME", nullptr);
}

}  // namespace
}  // namespace icn
