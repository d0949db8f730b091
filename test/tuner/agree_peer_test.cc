// A hostile follower against a real agreement leader (its service thread, TCP on loopback): it knows the
// rendezvous secret (it read the leader's file, as any process of the user can) and breaks the protocol after
// START with a report the leader must refuse. The leader drops it, stops the agreement with a WARN (no crash, no
// allocation sized by the peer), and keeps running.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/log.h"
#include "tuner/agree_service.h"
#include "tuner/agree_wire.h"

namespace icn::tuner {
namespace {

using namespace agree;

bool readAll(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = recv(fd, c, n, 0);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// One frame: its type and payload; false when the connection closed or timed out.
bool readFrame(int fd, uint8_t* type, std::string* payload) {
  uint8_t h[kHeader];
  if (!readAll(fd, h, sizeof h)) return false;
  Reader r{h, sizeof h};
  uint32_t magic = r.u32();
  *type = r.u8();
  r.u8(), r.u8(), r.u8();
  uint32_t len = r.u32();
  if (magic != kMagic || len > kMaxPayload) return false;
  payload->resize(len);
  return len == 0 || readAll(fd, payload->data(), len);
}

void sendRaw(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

class HostileFollower : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/icn-agree-peer-XXXXXX";
    ASSERT_NE(mkdtemp(t), nullptr);
    dir_ = t;
    setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1);
    setenv("ICN_SOCKET_IFNAME", "lo", 1);
    unsetenv("ICN_TUNER_RENDEZVOUS");
    commId_ = 0x5eed0000u + static_cast<uint64_t>(getpid());
    leader_ = std::make_shared<Agreement>(commId_, 2, Agreement::Role::Leader, AgreeParams{});
    std::string why;
    ASSERT_TRUE(attach(leader_, 1, &why)) << why;
    EXPECT_EQ(leader_->gate(0, 1), Agreement::Gate::Untuned);  // one local rank: START needs the follower's one
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    if (leader_) detach(leader_.get());
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // Reads the leader's file, connects, proves the secret, reports one rank and reads START.
  void joinAndStart() {
    char name[64];
    snprintf(name, sizeof name, "/icn/agree-%016llx-2", static_cast<unsigned long long>(commId_));
    std::string text;
    for (int i = 0; i < 200 && text.empty(); ++i) {
      std::ifstream in(dir_ + name);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
      if (text.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string addr = text.substr(text.find("addr ") + 5);
    addr = addr.substr(0, addr.find('\n'));
    std::string tok = text.substr(text.find("token ") + 6, 64);
    Token token{};
    ASSERT_TRUE(unhex(tok, token.data(), token.size()));
    SockAddr sa;
    ASSERT_TRUE(parseAddr(addr, &sa));
    fd_ = socket(sa.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{2, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ASSERT_EQ(connect(fd_, sa.sa(), sa.len), 0);
    uint8_t type = 0;
    std::string p;
    ASSERT_TRUE(readFrame(fd_, &type, &p));
    ASSERT_EQ(type, kChallenge);
    Nonce nl{}, nf{};
    memcpy(nl.data(), p.data(), nl.size());
    nf[0] = 42;
    Digest m = proof(token, 'F', commId_, nl, nf);
    Writer w;
    w.u64(commId_);
    w.u32(2);
    w.bytes(nf.data(), nf.size());
    w.bytes(m.data(), m.size());
    sendRaw(fd_, frame(kHello, w.b));
    ASSERT_TRUE(readFrame(fd_, &type, &p));
    ASSERT_EQ(type, kWelcome);
    Writer members;
    members.u32(1);
    sendRaw(fd_, frame(kMembers, members.b));
    ASSERT_TRUE(readFrame(fd_, &type, &p));
    ASSERT_EQ(type, kStart);
    for (int i = 0; i < 400 && leader_->start() == Agreement::kNever; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_NE(leader_->start(), Agreement::kNever);
    ASSERT_FALSE(leader_->frozen());
  }

  // After the hostile frame: the leader froze and closed the connection.
  void expectDropped() {
    for (int i = 0; i < 400 && !leader_->frozen(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(leader_->frozen());
    EXPECT_FALSE(leader_->frozenQuietly()) << "a protocol break is a WARN, not a normal end";
    uint8_t type = 0;
    std::string p;
    bool closed = false;
    for (int i = 0; i < 8 && !closed; ++i) closed = !readFrame(fd_, &type, &p);  // a FREEZE may come first
    EXPECT_TRUE(closed) << "the leader dropped the follower";
  }

  std::string report(int c, int b, int arms, bool duplicate = false) {
    std::vector<ArmEstimate> v;
    for (int i = 0; i < arms; ++i)
      v.push_back(ArmEstimate{Decision{static_cast<int8_t>(i % 7), static_cast<int8_t>((i / 7) % 3), 0}, 10, 4});
    if (duplicate && !v.empty()) v.push_back(v.front());
    Writer w;
    w.u8(static_cast<uint8_t>(c));
    w.u8(static_cast<uint8_t>(b));
    w.u8(static_cast<uint8_t>(v.size()));
    for (const ArmEstimate& a : v) {
      w.u8(static_cast<uint8_t>(a.d.algo));
      w.u8(static_cast<uint8_t>(a.d.proto));
      w.u8(4), w.u8(0);
      uint32_t bits;
      memcpy(&bits, &a.us, 4);
      w.u32(bits);
    }
    return frame(kReport, w.b);
  }

  std::string dir_;
  uint64_t commId_ = 0;
  std::shared_ptr<Agreement> leader_;
  int fd_ = -1;
};

TEST_F(HostileFollower, ReportForABucketOutOfRangeIsRefused) {
  joinAndStart();
  sendRaw(fd_, report(4, coll::kNumBuckets, 2));
  expectDropped();
}

TEST_F(HostileFollower, ReportWithMoreArmsThanAnyPlanIsRefused) {
  joinAndStart();
  sendRaw(fd_, report(4, 20, BucketExplorer::kMaxArms + 1));
  expectDropped();
}

TEST_F(HostileFollower, ReportNamingAnArmTwiceIsRefused) {
  joinAndStart();
  sendRaw(fd_, report(4, 20, 3, true));
  expectDropped();
}

TEST_F(HostileFollower, SecondReportOfABucketIsRefused) {
  joinAndStart();
  sendRaw(fd_, report(4, 20, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(leader_->frozen()) << "one report per bucket is the protocol";
  sendRaw(fd_, report(4, 20, 3));
  expectDropped();
}

TEST_F(HostileFollower, FrameLongerThanTheLimitIsRefusedBeforeItArrives) {
  joinAndStart();
  Writer w;
  w.u32(kMagic);
  w.u8(kReport);
  w.u8(0), w.u8(0), w.u8(0);
  w.u32(0xFFFFFFF0u);  // a length the leader would have to buffer
  sendRaw(fd_, w.b);
  expectDropped();
}

}  // namespace
}  // namespace icn::tuner
