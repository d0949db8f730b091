#include "hostile_setups.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "core/auth.h"
#include "core/oob.h"
#include "core/wire.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::adversary {
namespace {

constexpr size_t kBatch = 32;  // connections opened before their challenges are answered

// Answers the CHALLENGE of `p` with a correct HELLO carrying `blob`; false when the listener closed it first.
bool proveHello(WirePeer& p, uint64_t commId, std::vector<uint8_t> blob, const std::string& key) {
  auto nonceA = p.readChallenge(Ms(3000));
  if (!nonceA) return false;
  Hello h = connectorHello(commId, std::move(blob));
  tagConnectorHello(&h, *nonceA, key);
  return p.send(helloFrame(h));
}

tcp::Blob controlRequest(int lanes) {
  tcp::Blob b;
  b.kind = tcp::kBlobControl;
  b.value = uint16_t(lanes);
  auth::fillNonce(std::span<uint8_t, 16>(b.token, 16));
  return b;
}

}  // namespace

void raiseDescriptorLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

std::vector<std::unique_ptr<WirePeer>> provenIdleFlood(const SockAddr& to, uint64_t commId, size_t count,
                                                       const std::string& key) {
  std::vector<std::unique_ptr<WirePeer>> all;
  while (all.size() < count) {
    const size_t first = all.size();
    for (size_t i = 0; i < kBatch && all.size() < count; i++) all.push_back(std::make_unique<WirePeer>(to));
    std::vector<WirePeer*> proven;
    for (size_t i = first; i < all.size(); i++)
      if (all[i]->ok() && proveHello(*all[i], commId, acceptableBlob(), key)) proven.push_back(all[i].get());
    // Over TCP the listener answers a proven control handshake at once: waiting for that answer paces the flood
    // to the listener (none of its connections is dropped unproven, as a patient attacker's would not be).
    if (transportUnderTest() == kTransportTcp)
      for (WirePeer* p : proven) p->readFrame(Ms(3000));
  }
  return all;
}

std::vector<std::unique_ptr<WirePeer>> unfinishedTcpFlood(const SockAddr& to, uint64_t commId, size_t connections,
                                                          int lanes, const std::string& key) {
  std::vector<std::unique_ptr<WirePeer>> all;
  for (size_t done = 0; done < connections;) {
    const size_t batch = std::max<size_t>(1, kBatch / size_t(lanes + 2));
    std::vector<std::pair<WirePeer*, tcp::Blob>> controls;
    for (size_t i = 0; i < batch && done < connections; i++, done++) {
      all.push_back(std::make_unique<WirePeer>(to));
      tcp::Blob b = controlRequest(lanes);
      if (all.back()->ok() && proveHello(*all.back(), commId, tcp::encodeBlob(b), key)) controls.push_back({all.back().get(), b});
    }
    for (auto& [control, blob] : controls) {
      auto answer = control->readFrame(Ms(3000));  // the victim's HELLO: lanes are opened after it, like ICN's
      if (!answer || answer->type != uint16_t(FrameType::Hello)) continue;
      for (int i = 0; i <= lanes; i++) {
        tcp::Blob lane = blob;
        lane.kind = tcp::kBlobLane;
        lane.value = uint16_t(i);
        all.push_back(std::make_unique<WirePeer>(to));
        if (all.back()->ok()) proveHello(*all.back(), commId, tcp::encodeBlob(lane), key);
      }
    }
  }
  return all;
}

// ---- HostileListener ---------------------------------------------------------------------------------------

HostileListener::HostileListener() {
  SockAddr want;
  std::string ifname;
  if (pickInterface(&want, &ifname) != Status::Ok || listenOn(want, &fd_, &addr_) != Status::Ok) fd_.reset();
}

std::array<uint8_t, kHandleSize> HostileListener::handle() const {
  std::array<uint8_t, kHandleSize> h{};
  writeListenHandle(h, transportUnderTest(), addr_);
  return h;
}

void HostileListener::acceptMore() {
  for (;;) {
    int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    held_.emplace_back(fd);
  }
}

bool HostileListener::answer(const std::string& key, std::span<const uint8_t> extra, Ms limit, std::string* why) {
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, int(limit.count())) != 1) {
    *why = "the victim never connected";
    return false;
  }
  int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    *why = "accept failed";
    return false;
  }
  control_.reset(fd);
  announceSource(fd);
  WirePeer wire(control_);
  Nonce nonceA;
  auth::fillNonce(nonceA);
  if (!wire.send(encodeFrame(FrameType::Challenge, nonceA))) {
    *why = "the victim closed before the CHALLENGE";
    return false;
  }
  auto f = wire.readFrame(limit);
  Hello ch;
  std::string err;
  if (!f || f->type != uint16_t(FrameType::Hello) || decodeHello(f->payload, &ch, &err) != Status::Ok) {
    *why = "no HELLO from the victim " + err;
    return false;
  }
  Hello ah = connectorHello(ch.commId, {});  // identity "rogue-peer", the victim's communicator
  memcpy(ah.nonce, nonceA.data(), nonceA.size());
  if (transportUnderTest() == kTransportTcp) {
    tcp::Blob asked;
    if (tcp::decodeBlob(ch.blob, &asked, &err) != Status::Ok) {
      *why = "the victim's TCP request: " + err;
      return false;
    }
    tcp::Blob b = asked;
    b.value = 0;  // lane 0 only
    b.eagerBytes = 0;
    ah.blob = tcp::encodeBlob(b);
  } else if (transportUnderTest() == kTransportUcx) {
    ah.blob = ucxBlob(UcxRogue::realWorkerAddress());
  } else {
    *why = "no acceptor answer for this transport";
    return false;
  }
  ah.mac.clear();
  ah.mac = tagWith(key, 'A', helloDigest(ch), helloDigest(ah));
  std::vector<uint8_t> bytes = helloFrame(ah);
  bytes.insert(bytes.end(), extra.begin(), extra.end());
  if (!wire.send(bytes)) {
    *why = "the victim closed before our HELLO";
    return false;
  }
  return true;
}

size_t HostileListener::stream(size_t most, const std::function<bool()>& stop) {
  std::vector<uint8_t> chunk(1 << 20, 0x42);
  size_t sent = 0;
  while (sent < most && !stop()) {
    acceptMore();
    pollfd p{control_.get(), POLLOUT, 0};
    if (::poll(&p, 1, 10) < 0) break;
    if (!(p.revents & POLLOUT)) {
      if (p.revents & (POLLERR | POLLHUP)) break;
      continue;
    }
    ssize_t n = ::send(control_.get(), chunk.data(), std::min(chunk.size(), most - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent += size_t(n);
    else if (n < 0 && errno != EAGAIN && errno != EINTR) break;  // the victim closed it
  }
  return sent;
}

void HostileListener::holdConnections(const std::function<bool()>& stop) {
  while (!stop()) {
    acceptMore();
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, 10);
  }
}

}  // namespace icn::adversary
