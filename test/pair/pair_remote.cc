#include "pair_remote.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace icn::testpair::remote {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxName = 4096;
constexpr size_t kMaxLog = 4u << 20;  // a peer's log beyond this is refused, ours is cut to its tail

void closeFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

bool sendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recvAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n) {
    pollfd pf{fd, POLLIN, 0};
    int r = poll(&pf, 1, static_cast<int>(left(deadline).count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool sendString(int fd, const std::string& s) {
  uint32_t n = htonl(static_cast<uint32_t>(s.size()));
  return sendAll(fd, &n, sizeof n) && sendAll(fd, s.data(), s.size());
}

bool recvString(int fd, size_t max, std::string* s, Clock::time_point deadline) {
  uint32_t n = 0;
  if (!recvAll(fd, &n, sizeof n, deadline)) return false;
  n = ntohl(n);
  if (n > max) return false;
  s->resize(n);
  return recvAll(fd, s->data(), n, deadline);
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // barriers are one byte each way
}

int listenFd(std::string* err) {
  static int fd = -1;
  if (fd >= 0) return fd;
  int l = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(atoi(config().port.c_str())));
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 8) != 0) {
    *err = "cannot listen on port " + config().port + ": " + strerror(errno);
    if (l >= 0) close(l);
    return -1;
  }
  return fd = l;
}

int acceptOne(int l, Clock::time_point deadline) {
  pollfd pf{l, POLLIN, 0};
  if (poll(&pf, 1, static_cast<int>(left(deadline).count())) != 1) return -1;
  return accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
}

int connectOne(Clock::time_point deadline) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(config().host.c_str(), config().port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  // The peer process may not have reached its first pair yet: retry until the deadline.
  while (fd < 0 && Clock::now() < deadline) {
    for (addrinfo* r = res; r && fd < 0; r = r->ai_next) {
      fd = socket(r->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && connect(fd, r->ai_addr, r->ai_addrlen) != 0) closeFd(&fd);
    }
    if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  freeaddrinfo(res);
  return fd;
}

}  // namespace

const Config& config() {
  static const Config c = [] {
    Config c;
    const char* rank = getenv("ICN_PAIR_RANK");
    if (!rank || !*rank) return c;
    const char* peer = getenv("ICN_PAIR_PEER");
    std::string p = peer ? peer : "";
    size_t colon = p.rfind(':');
    if ((strcmp(rank, "0") && strcmp(rank, "1")) || colon == std::string::npos || atoi(p.c_str() + colon + 1) <= 0) {
      fprintf(stderr, "ICN_PAIR_RANK=%s ICN_PAIR_PEER=%s: need rank 0 or 1 and HOST:PORT\n", rank, p.c_str());
      abort();
    }
    c.rank = rank[0] - '0';
    c.host = p.substr(0, colon);
    c.port = p.substr(colon + 1);
    if (c.host.size() > 2 && c.host.front() == '[' && c.host.back() == ']') c.host = c.host.substr(1, c.host.size() - 2);
    return c;
  }();
  return c;
}

bool open(const std::string& testName, std::chrono::seconds limit, Link* out, std::string* err) {
  auto deadline = Clock::now() + limit;
  Link l;
  auto failWith = [&](const std::string& why) {
    closeFd(&l.control);
    closeFd(&l.data);
    *err = why;
    return false;
  };
  if (config().rank == 0) {
    int lfd = listenFd(err);
    if (lfd < 0) return false;
    for (int i = 0; i < 2; i++) {
      int fd = acceptOne(lfd, deadline);
      char kind = 0;
      if (fd < 0 || !recvAll(fd, &kind, 1, deadline) || (kind != 'C' && kind != 'D') ||
          (kind == 'C' ? l.control : l.data) >= 0) {
        if (fd >= 0) close(fd);
        return failWith("no connection from the peer host within " + std::to_string(limit.count()) + " s");
      }
      (kind == 'C' ? l.control : l.data) = fd;
    }
  } else {
    for (char kind : {'C', 'D'}) {
      int fd = connectOne(deadline);
      if (fd < 0 || !sendAll(fd, &kind, 1)) {
        if (fd >= 0) close(fd);
        return failWith("cannot reach the peer host at " + config().host + ":" + config().port);
      }
      (kind == 'C' ? l.control : l.data) = fd;
    }
  }
  tune(l.data);
  std::string theirs;
  if (!sendString(l.control, testName) || !recvString(l.control, kMaxName, &theirs, deadline))
    return failWith("the peer host did not say which test it runs");
  if (theirs != testName) return failWith("the peer host runs " + theirs + ", this one " + testName);
  *out = l;
  return true;
}

bool exchange(int control, const Outcome& mine, Outcome* theirs, std::chrono::seconds limit, std::string* err) {
  auto deadline = Clock::now() + limit;
  std::string log = mine.log.size() > kMaxLog ? mine.log.substr(mine.log.size() - kMaxLog) : mine.log;
  uint32_t head[3] = {htonl(static_cast<uint32_t>(mine.pid)), htonl(static_cast<uint32_t>(mine.status)),
                      htonl(mine.hung ? 1u : 0u)};
  bool ok = sendAll(control, head, sizeof head) && sendString(control, log);
  if (ok && recvAll(control, head, sizeof head, deadline) && recvString(control, kMaxLog, &theirs->log, deadline)) {
    theirs->pid = static_cast<pid_t>(ntohl(head[0]));
    theirs->status = static_cast<int>(ntohl(head[1]));
    theirs->hung = ntohl(head[2]) != 0;
  } else {
    ok = false;
    *err = "no outcome from the peer host within " + std::to_string(limit.count()) + " s";
  }
  close(control);
  return ok;
}

}  // namespace icn::testpair::remote
