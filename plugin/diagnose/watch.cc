#include "diagnose/watch.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/socket.h"
#include "diagnose/registry.h"
#include "diagnose/service.h"

namespace icn::diagnose {
namespace {

class Ticker;
Ticker& ticker();

constexpr auto kTickEvery = std::chrono::seconds(1);
// The thread wakes this often to see whether the process ran when it should have: a wake-up later than this by
// more than kStallSlack (what a busy host's scheduler may take) counts as time the process was stopped or starved.
constexpr auto kStallLook = std::chrono::milliseconds(10);
constexpr auto kStallSlack = std::chrono::milliseconds(2);

// The tick thread: started by the first watched connection, it runs until the process exits or the plugin is
// unloaded (an exit handler registered from this library runs at both and joins it), so a job that opens and closes
// communicators does not start and stop a thread each time. Between communicators it finds no connection and does
// nothing. Start and stop run on the threads that open connections (NCCL's proxy threads) and at exit, never on the
// data path. A forked child inherits the flag but not the thread: it never joins its parent's. Between ticks it wakes
// every kStallLook to measure how long the process was not running (Diagnoser::noteStall).
class Ticker {
 public:
  void acquire() {
    std::lock_guard<std::mutex> lock(users_);
    if (thread_) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = false;
    }
    owner_ = getpid();
    thread_ = std::make_unique<std::thread>([this] { run(); });
    static bool atExitSet = false;
    if (!atExitSet) atExitSet = std::atexit([] { ticker().stopAtExit(); }) == 0;
  }
  bool running() {
    std::lock_guard<std::mutex> lock(users_);
    return thread_ != nullptr;
  }
  void stopAtExit() {
    std::lock_guard<std::mutex> lock(users_);
    stopLocked();
  }
  void stopForTesting() { stopAtExit(); }

 private:
  void stopLocked() {
    if (!thread_) return;
    if (getpid() != owner_) {  // a forked child: the thread is its parent's
      (void)thread_.release();
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_->join();
    thread_.reset();
  }
  void run() {
    using Clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mu_);
    Clock::time_point nextTick = Clock::now() + kTickEvery;
    for (;;) {
      const Clock::time_point due = Clock::now() + kStallLook;
      if (cv_.wait_until(lock, due, [this] { return stop_; })) return;
      const Clock::time_point woke = Clock::now();
      if (woke > due + kStallSlack)
        diagnoser().noteStall(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(woke - due - kStallSlack).count()));
      if (woke < nextTick) continue;
      nextTick = woke + kTickEvery;
      lock.unlock();
      diagnoser().tick(nowNs());
      lock.lock();
    }
  }

  std::mutex users_;  // thread_: serialises start and stop
  std::unique_ptr<std::thread> thread_;
  pid_t owner_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

Ticker& ticker() {
  static Ticker* t = new Ticker();  // never destroyed: a connection may close during static teardown
  return *t;
}

bool diagnosisOn() {
  const Settings& s = diagnoser().settings();
  return s.hangReportS > 0 || s.stragglerPeriodS > 0;
}

}  // namespace

ConnectionWatch::ConnectionWatch(LinkInfo info) : monitor_(links::open(std::move(info))) {
  if (diagnosisOn()) ticker().acquire();
}

ConnectionWatch::~ConnectionWatch() { links::close(monitor_); }

bool tickThreadRunning() { return ticker().running(); }
void stopTickThreadForTesting() { ticker().stopForTesting(); }

namespace {
std::string hostName() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0 || !h[0]) return "unknown";
  return h;
}

std::string socketAddress(int fd, bool peer) {
  if (fd < 0) return "";
  SockAddr a;
  a.len = sizeof a.storage;
  sockaddr* sa = reinterpret_cast<sockaddr*>(&a.storage);
  if ((peer ? getpeername(fd, sa, &a.len) : getsockname(fd, sa, &a.len)) != 0) return "";
  return a.str();
}
}  // namespace

LinkInfo linkInfoFor(const NetCommInfo& info, int socketFd) {
  LinkInfo l;
  l.commId = info.commId;
  l.rank = info.localRank;
  l.peerRank = info.peerRank;
  l.host = hostName();
  l.addr = socketAddress(socketFd, false);
  const size_t colon = info.peer.rfind(':');
  l.peerHost = colon == std::string::npos ? info.peer : info.peer.substr(0, colon);
  l.peerAddr = socketAddress(socketFd, true);
  l.dir = info.isSend ? Dir::Send : Dir::Recv;
  return l;
}

}  // namespace icn::diagnose
