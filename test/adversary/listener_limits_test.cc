// The listener in one process, driven by hand. When the process runs out of descriptors (a connection flood, or
// a job near its `ulimit -n`): accept's EMFILE is temporary. One WARN, poll() keeps succeeding, and the waiting
// connection is taken and challenged as soon as a descriptor is free again. When the set-up budget is spent by a
// flood from another address: the flood gives way, never the honest peer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <string>
#include <vector>

#include "core/connect_driver.h"
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
  ASSERT_EQ(OobListener::open(kTransportUcx, 0x1234, 1, handle, &l), Status::Ok);
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
  std::vector<AcceptedHandshake> ready;
  Status s1 = l->poll(1, &ready), s2 = l->poll(1, &ready);
  size_t pendingWhileOut = l->pendingCount();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(s1, Status::Ok) << "accept's EMFILE failed the listener";
  EXPECT_EQ(s2, Status::Ok);
  EXPECT_EQ(pendingWhileOut, 0u);
  EXPECT_EQ(warningsWith("Too many open files"), 1u) << "expected exactly one WARN for the episode";
  // A descriptor is free again: the waiting connection is accepted and challenged.
  EXPECT_EQ(l->poll(1, &ready), Status::Ok);
  EXPECT_EQ(l->pendingCount(), 1u);
  EXPECT_TRUE(client.readChallenge().has_value()) << "the connection that waited was never served";
  setLogSink(nullptr);
}

// A connection from `source` (a loopback address other than the listener's, as another host) that never speaks.
Fd idleFrom(const char* source, const SockAddr& to) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 || ::connect(fd.get(), to.sa(), to.len) != 0)
    fd.reset();
  return fd;
}

bool closedByPeer(const Fd& fd) {
  uint8_t b[256];
  for (;;) {
    ssize_t n = ::recv(fd.get(), b, sizeof b, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

// A flood from 127.0.0.2 keeps the budget (8 sockets) spent, opening more than the budget's worth of connections
// between any two steps of an honest connector from 127.0.0.1: the honest handshake is proven and handed over, the
// flood's oldest connections are the ones dropped, and the listener never holds more than its budget.
TEST(AdversaryListener, FloodFromAnotherAddressGivesWayToTheHonestPeer) {
  g_warnings.clear();
  setLogSink(&captureSink);
  setenv("ICN_SOCKET_IFNAME", "lo", 1);
  setenv("ICN_LISTEN_MAX_SETUPS", "8", 1);
  params::reloadForTesting();
  std::array<uint8_t, kHandleSize> handle{};
  std::unique_ptr<OobListener> l;
  ASSERT_EQ(OobListener::open(kTransportUcx, 0x1234, 1, handle, &l), Status::Ok);
  ASSERT_EQ(l->ledger().budget(), 8u);
  std::vector<Fd> flood;
  std::vector<AcceptedHandshake> ready;
  auto floodRound = [&] {  // 12 new flood connections, each accepted (and counted) by the listener
    for (int i = 0; i < 12; i++) {
      flood.push_back(idleFrom("127.0.0.2", l->address()));
      ASSERT_TRUE(flood.back().valid());
      ASSERT_EQ(l->poll(0, &ready), Status::Ok);
      ASSERT_LE(l->ledger().sockets(), l->ledger().budget());
    }
  };
  floodRound();
  std::unique_ptr<OobConnector> honest;
  ASSERT_EQ(OobConnector::start(handle, kTransportUcx, makeLocalHello(kTransportUcx, 0x1234, {}), &honest), Status::Ok);
  bool handedOver = false;
  for (int step = 0; step < 200 && !handedOver; step++) {
    floodRound();
    Handshake::Phase phase;
    ASSERT_EQ(honest->progress(&phase), Status::Ok) << "the honest handshake was dropped";
    ASSERT_EQ(l->poll(1, &ready), Status::Ok);
    for (auto& a : ready) {
      EXPECT_NE(a.hs->peerName().find("(127.0.0.1:"), std::string::npos) << "handed over: " << a.hs->peerName();
      handedOver = true;
    }
  }
  EXPECT_TRUE(handedOver) << "the honest peer's proven handshake never reached the transport";
  EXPECT_TRUE(closedByPeer(flood.front())) << "the flood's oldest connection is still held";
  EXPECT_FALSE(closedByPeer(flood.back())) << "the flood's newest connection was dropped";
  EXPECT_EQ(warningsWith("dropping the oldest set-up of 127.0.0.2, the address holding the most"), 1u);
  EXPECT_EQ(warningsWith("dropping the oldest set-up of 127.0.0.1,"), 0u) << "an entry of the honest address was evicted";
  setLogSink(nullptr);
  unsetenv("ICN_LISTEN_MAX_SETUPS");
  params::reloadForTesting();
}


// A transport set-up that never becomes ready once the handshake is done (a peer that left during UCX wire-up):
// the handshake's deadline has ended with its READY, so the accept driver's own deadline drops it, with a WARN
// naming the peer, and its socket closes.
struct ReadyAtOnce : ConnectionSetup {
  Status onPeerKnown(const Handshake&, std::vector<uint8_t>* answer) override {
    if (answer) answer->assign(1, 0x5A);
    return Status::Ok;
  }
};
struct NeverReady : ReadyAtOnce {
  Status poll(bool* ready) override {
    *ready = false;
    return Status::Ok;
  }
};

TEST(AdversaryListener, SetupNeverReadyAfterTheHandshakeIsDroppedAtTheDeadline) {
  g_warnings.clear();
  setLogSink(&captureSink);
  setenv("ICN_SOCKET_IFNAME", "lo", 1);
  setenv("ICN_CONNECT_TIMEOUT_MS", "300", 1);
  params::reloadForTesting();
  std::array<uint8_t, kHandleSize> handle{};
  std::unique_ptr<OobListener> l;
  ASSERT_EQ(OobListener::open(kTransportUcx, 0x1234, 1, handle, &l), Status::Ok);
  AcceptDriver<NeverReady> acceptor(std::move(l), 16);
  std::array<uint8_t, kHandleSize> connectHandle = handle;
  std::unique_ptr<PendingConnection<ReadyAtOnce>> connected;
  auto start = [](std::unique_ptr<ReadyAtOnce>* s, std::vector<uint8_t>* blob) {
    *s = std::make_unique<ReadyAtOnce>();
    blob->assign(1, 0xC0);
    return Status::Ok;
  };
  auto make = [](std::unique_ptr<NeverReady>* s) {
    *s = std::make_unique<NeverReady>();
    return Status::Ok;
  };
  const auto t0 = std::chrono::steady_clock::now();
  bool delivered = false;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2) && warningsWith("was not ready") == 0) {
    if (!connected) ASSERT_EQ(driveConnect<ReadyAtOnce>(connectHandle, kTransportUcx, 0x1234, start, &connected), Status::Ok);
    std::unique_ptr<Handshake> hs;
    std::unique_ptr<NeverReady> s;
    ASSERT_EQ(acceptor.poll(make, &hs, &s), Status::Ok);
    delivered |= hs != nullptr;
    usleep(1000);
  }
  ASSERT_TRUE(connected) << "the connector's handshake never finished";
  EXPECT_FALSE(delivered) << "a connection whose set-up never got ready was handed to NCCL";
  EXPECT_EQ(warningsWith("was not ready"), 1u) << "expected one WARN naming the peer at the deadline";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300)) << "dropped before the deadline";
  // Its socket closed: the connector's control socket reads end-of-file.
  Fd fd = connected->oob->handshake().takeFd();
  pollfd p{fd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  char byte;
  EXPECT_EQ(::recv(fd.get(), &byte, 1, 0), 0);
  unsetenv("ICN_CONNECT_TIMEOUT_MS");
  params::reloadForTesting();
  setLogSink(nullptr);
}

}  // namespace
}  // namespace icn::adversary
