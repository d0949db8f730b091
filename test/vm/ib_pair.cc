// ib_pair: two-process exerciser of the ib transport (linked directly, no NCCL), for the Soft-RoCE VM.
//   ib_pair --role a|b --dir DIR [--case functional|deadpeer|bw|lat|waits] [--size N] [--iters N] [--dev N]
// Role a sends data, role b receives; handles travel as files in DIR. Both directions are connected (lat uses
// them). Exit status 0 = every check passed; "RESULT key=value" lines carry measurements.
// waits (run with ICN_HANG_REPORT_S=1 and ICN_HANG_REPORT_DIR): b's receive waits for a's bytes and b's send for a's
// clear-to-send; b's hang report must name both, then read resumed once a lets them complete.
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/coarse_clock.h"
#include "core/log.h"
#include "core/transport.h"
#include "transport/ib/ib_comm.h"
#include "transport/ib/ib_transport.h"

using namespace icn;
using Clock = std::chrono::steady_clock;

namespace {
std::string role, dir = "/tmp", testCase = "functional";
size_t size = 1 << 20;
int iters = 100, dev = 0, pollSleepUs = 0;

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ib_pair[%s]: FAIL: ", role.c_str());
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  _exit(1);
}
#define CHECK_OK(expr) do { Status s_ = (expr); if (s_ != Status::Ok) die("%s -> %s", #expr, toString(s_)); } while (0)

void until(const char* what, int timeoutMs, const std::function<bool()>& f) {
  // The deadline is read from the coarse clock: the VM's clocksource (HPET) makes every precise read a
  // system call, which would be most of this loop's cost.
  auto end = icn::coarseNow() + std::chrono::milliseconds(timeoutMs);
  while (!f()) {
    if (icn::coarseNow() > end) die("timeout waiting for %s", what);
    // The VM has 2 vCPUs shared by both processes and the kernel's rxe work: spin politely.
    if (pollSleepUs > 0) usleep(pollSleepUs);
    else sched_yield();
  }
}

void writeHandle(const std::string& name, const uint8_t* h) {
  std::string tmp = dir + "/" + name + ".tmp";
  std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(h), kHandleSize);
  rename(tmp.c_str(), (dir + "/" + name).c_str());
}
void readHandle(const std::string& name, uint8_t* h) {
  until(name.c_str(), 60000, [&] {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    return in && in.read(reinterpret_cast<char*>(h), kHandleSize) && in.gcount() == kHandleSize;
  });
}

uint8_t pattern(size_t i, int seed) { return uint8_t(i * 131 + seed * 7 + (i >> 12)); }

// Completes a request, returning its sizes.
void wait(Request* r, int* sizes, const char* what, int timeoutMs = 60000) {
  bool done = false;
  until(what, timeoutMs, [&] {
    CHECK_OK(r->test(&done, sizes));
    return done;
  });
}

struct Buffers {
  std::vector<uint8_t> mem;
  void* mh = nullptr;
};

struct Conn {
  std::unique_ptr<Transport> t;
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
};

Conn establish() {
  Conn c;
  std::string why;
  CHECK_OK(ib::createTransport(&c.t, &why));
  if (dev >= c.t->deviceCount()) die("device %d of %d", dev, c.t->deviceCount());
  CommConfig cfg;
  cfg.commId = 42;
  uint8_t mine[kHandleSize] = {}, theirs[kHandleSize] = {};
  std::unique_ptr<ListenComm> l;
  CHECK_OK(c.t->listen(dev, cfg, HandleBytes(mine), &l));
  writeHandle(role == "a" ? "h_b_to_a" : "h_a_to_b", mine);
  readHandle(role == "a" ? "h_a_to_b" : "h_b_to_a", theirs);
  until("connect+accept", 60000, [&] {
    if (!c.send) CHECK_OK(c.t->connect(dev, cfg, HandleBytes(theirs), &c.send));
    if (!c.recv) CHECK_OK(l->accept(&c.recv));
    return c.send && c.recv;
  });
  return c;
}

void reg(Comm& comm, Buffers& b, size_t n) {
  b.mem.assign(n, 0);
  CHECK_OK(comm.regMr(b.mem.data(), n, kMemHost, &b.mh));
}

// One receive of n bytes at p (registered as mh); null when every request is in flight.
Request* recvOne(Conn& c, void* p, size_t n, void* mh, int tag) {
  void* data[1] = {p};
  size_t sz[1] = {n};
  int tags[1] = {tag};
  void* mhs[1] = {mh};
  Request* r = nullptr;
  CHECK_OK(c.recv->irecv(1, data, sz, tags, mhs, &r));
  return r;
}

void sendOne(Conn& c, Buffers& b, size_t n, int tag, Request** out) {
  *out = nullptr;
  until("isend slot", 60000, [&] {
    CHECK_OK(c.send->isend(b.mem.data(), n, tag, b.mh, out));
    return *out != nullptr;
  });
}

void functional(Conn& c) {
  const size_t cap = 8u << 20;
  Buffers b;
  reg(role == "a" ? static_cast<Comm&>(*c.send) : *c.recv, b, cap * 4);
  // 1) sizes, including zero bytes and a multi-chunk message.
  const size_t sizes[] = {0, 1, 4096, 65536 + 3, 1u << 20, 8u << 20};
  for (int i = 0; i < 6; ++i) {
    const size_t n = sizes[i];
    if (role == "a") {
      for (size_t k = 0; k < n; ++k) b.mem[k] = pattern(k, i);
      Request* r;
      sendOne(c, b, n, 100 + i, &r);
      wait(r, nullptr, "send");
    } else {
      void* data[1] = {b.mem.data()};
      size_t sz[1] = {cap};
      int tags[1] = {100 + i};
      void* mhs[1] = {b.mh};
      Request* r = nullptr;
      CHECK_OK(c.recv->irecv(1, data, sz, tags, mhs, &r));
      int got[8] = {};
      wait(r, got, "recv");
      if (size_t(got[0]) != n) die("size %zu: received %d bytes", n, got[0]);
      for (size_t k = 0; k < n; ++k)
        if (b.mem[k] != pattern(k, i)) die("size %zu: byte %zu differs", n, k);
      // 4) flush path (forced for host memory in this test).
      int isz[1] = {got[0]};
      Request* f = nullptr;
      CHECK_OK(c.recv->iflush(1, data, isz, mhs, &f));
      if (n > 0 && !f) die("iflush returned no request although flushing is forced");
      if (f) wait(f, nullptr, "flush");
    }
  }
  printf("ib_pair[%s]: sizes ok\n", role.c_str());
  // 2) grouped receive of 4, sent in a different tag order.
  const size_t gs[4] = {1000, 0, 70000, 300000};
  const size_t off[4] = {0, cap, 2 * cap, 3 * cap};
  if (role == "a") {
    const int order[4] = {2, 0, 3, 1};
    Request* rs[4];
    for (int j = 0; j < 4; ++j) {
      int i = order[j];
      for (size_t k = 0; k < gs[i]; ++k) b.mem[off[i] + k] = pattern(k, 50 + i);
      until("grouped isend", 60000, [&] {
        CHECK_OK(c.send->isend(b.mem.data() + off[i], gs[i], 10 + i, b.mh, &rs[j]));
        return rs[j] != nullptr;
      });
    }
    for (auto* r : rs) wait(r, nullptr, "grouped send");
  } else {
    void* data[4];
    size_t sz[4];
    int tags[4];
    void* mhs[4];
    for (int i = 0; i < 4; ++i) { data[i] = b.mem.data() + off[i]; sz[i] = cap; tags[i] = 10 + i; mhs[i] = b.mh; }
    Request* r = nullptr;
    CHECK_OK(c.recv->irecv(4, data, sz, tags, mhs, &r));
    int got[8] = {};
    wait(r, got, "grouped recv");
    for (int i = 0; i < 4; ++i) {
      if (size_t(got[i]) != gs[i]) die("grouped %d: %d bytes, want %zu", i, got[i], gs[i]);
      for (size_t k = 0; k < gs[i]; ++k)
        if (b.mem[off[i] + k] != pattern(k, 50 + i)) die("grouped %d: byte %zu differs", i, k);
    }
  }
  printf("ib_pair[%s]: grouped ok\n", role.c_str());
  // 3) 200 messages with up to 32 in flight (FIFO wraps several times).
  const size_t m = 65536;
  const int total = 200, window = 32;
  std::vector<Request*> inflight(total, nullptr);
  int posted = 0, completed = 0;
  until("pipeline", 120000, [&] {
    while (posted < total && posted - completed < window) {
      uint8_t* p = b.mem.data() + size_t(posted % window) * m;
      Request* r = nullptr;
      if (role == "a") {
        for (size_t k = 0; k < m; k += 997) p[k] = pattern(k, posted);
        CHECK_OK(c.send->isend(p, m, 7, b.mh, &r));
      } else {
        r = recvOne(c, p, m, b.mh, 7);
      }
      if (!r) break;
      inflight[posted++] = r;
    }
    if (completed == posted) return false;  // nothing posted yet (sender: no CTS yet)
    bool done = false;
    int got[8] = {};
    CHECK_OK(inflight[completed]->test(&done, got));
    if (done) {
      if (role == "b") {
        const uint8_t* p = b.mem.data() + size_t(completed % window) * m;
        if (size_t(got[0]) != m) die("pipeline %d: %d bytes", completed, got[0]);
        for (size_t k = 0; k < m; k += 997)
          if (p[k] != pattern(k, completed)) die("pipeline %d: byte %zu differs", completed, k);
      }
      ++completed;
    }
    return completed == total;
  });
  printf("ib_pair[%s]: pipeline ok\n", role.c_str());
  CHECK_OK((role == "a" ? static_cast<Comm&>(*c.send) : *c.recv).deregMr(b.mh));
}

void bandwidth(Conn& c) {
  const int window = 32;
  Buffers b;
  // Like ib_write_bw, every message of the window uses the same buffer (contents are not checked here): a
  // 32x larger working set costs real time under emulation and would skew the comparison.
  reg(role == "a" ? static_cast<Comm&>(*c.send) : *c.recv, b, size);
  std::vector<Request*> inflight(iters, nullptr);
  int posted = 0, completed = 0;
  auto t0 = Clock::now();
  until("bandwidth", 300000, [&] {
    while (posted < iters && posted - completed < window) {
      uint8_t* p = b.mem.data();
      Request* r = nullptr;
      if (role == "a") {
        CHECK_OK(c.send->isend(p, size, 1, b.mh, &r));
      } else {
        r = recvOne(c, p, size, b.mh, 1);
      }
      if (!r) break;
      if (posted == 0) t0 = Clock::now();
      inflight[posted++] = r;
    }
    if (completed == posted) return false;
    bool done = false;
    CHECK_OK(inflight[completed]->test(&done, nullptr));
    if (done) ++completed;
    return completed == iters;
  });
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  // The sender's clock: from the first send the receiver allowed to the last one acknowledged.
  if (role == "a") printf("RESULT ib_pair_bw_MBps_%zu=%.2f\n", size, double(size) * iters / s / (1 << 20));
}

void latency(Conn& c) {
  Buffers sb, rb;
  reg(*c.send, sb, size ? size : 1);
  reg(*c.recv, rb, size ? size : 1);
  // The next receive is always posted before the matching send can start, as NCCL does: the sender finds
  // its clear-to-send already there and each half round trip is one data write.
  auto postRecv = [&] { return recvOne(c, rb.mem.data(), size, rb.mh, 3); };
  auto sendMsg = [&] {
    Request* r;
    sendOne(c, sb, size, 3, &r);
    return r;
  };
  const int warm = 10;
  auto t0 = Clock::now();
  Request* rr = postRecv();
  for (int i = 0; i < iters + warm; ++i) {
    if (i == warm) t0 = Clock::now();
    if (role == "a") {
      Request* s = sendMsg();
      wait(s, nullptr, "ping");
      wait(rr, nullptr, "pong");
      if (i + 1 < iters + warm) rr = postRecv();
    } else {
      wait(rr, nullptr, "ping");
      if (i + 1 < iters + warm) rr = postRecv();
      wait(sendMsg(), nullptr, "pong");
    }
  }
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters / 2;
  if (role == "a") printf("RESULT ib_pair_lat_us_%zu=%.2f\n", size, us);
}

void deadPeer(Conn& c) {
  if (role == "a") {
    // Let b post its receive, then vanish without closing anything.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    _exit(0);
  }
  Buffers b;
  reg(*c.recv, b, 4096);
  Request* r = recvOne(c, b.mem.data(), 4096, b.mh, 1);
  auto t0 = Clock::now();
  bool done = false;
  Status st = Status::Ok;
  while (st == Status::Ok && !done && Clock::now() - t0 < std::chrono::seconds(30)) st = r->test(&done, nullptr);
  if (st == Status::Ok) die("test() did not report the dead peer within 30 s");
  printf("ib_pair[b]: dead peer reported as %s after %.1f s\n", toString(st),
         std::chrono::duration<double>(Clock::now() - t0).count());
}
// The text of the hang report in ICN_HANG_REPORT_DIR once it holds every needle ("" after 20 s).
std::string reportWith(std::initializer_list<const char*> needles) {
  const char* d = getenv("ICN_HANG_REPORT_DIR");
  if (!d) die("waits: ICN_HANG_REPORT_DIR is not set");
  auto end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end) {
    std::string cmd = std::string("cat ") + d + "/icn-hang-*.json 2>/dev/null";
    std::string text;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
      pclose(p);
    }
    bool all = !text.empty();
    for (const char* n : needles) all = all && text.find(n) != std::string::npos;
    if (all) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

void waits(Conn& c) {
  const std::string go = dir + "/go";
  Buffers in, out;
  reg(*c.recv, in, 4096);
  reg(*c.send, out, 4096);
  if (role == "a") {  // lets b's operations complete once b saw them reported
    until("b's go", 60000, [&] { return access(go.c_str(), F_OK) == 0; });
    Request* r = recvOne(c, in.mem.data(), 4096, in.mh, 6);
    Request* s = nullptr;
    sendOne(c, out, 4096, 5, &s);
    wait(r, nullptr, "receive of tag 6");
    wait(s, nullptr, "send of tag 5");
    return;
  }
  Request* r = recvOne(c, in.mem.data(), 4096, in.mh, 5);
  Request* s = nullptr;
  sendOne(c, out, 4096, 6, &s);
  bool done = false;  // neither can complete; testing keeps the proxy's part going
  CHECK_OK(r->test(&done, nullptr));
  CHECK_OK(s->test(&done, nullptr));
  std::string rep = reportWith({"\"state\":\"stalled\"", "\"dir\":\"recv\"", "\"tag\":5,\"bytes\":4096,\"bytes_done\":0,\"ready\":false",
                                "\"dir\":\"send\"", "\"tag\":6,\"bytes\":4096,\"bytes_done\":0,\"ready\":false"});
  if (rep.empty()) die("waits: no hang report naming the receive of tag 5 and the send of tag 6 within 20 s");
  printf("ib_pair[b]: hang report: %s\n", rep.c_str());
  std::ofstream(go) << "go\n";
  wait(r, nullptr, "receive of tag 5");
  wait(s, nullptr, "send of tag 6");
  if (reportWith({"\"state\":\"resumed\""}).empty()) die("waits: the report was not rewritten as resumed");
}
}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--role") role = v;
    else if (k == "--dir") dir = v;
    else if (k == "--case") testCase = v;
    else if (k == "--size") size = strtoull(v.c_str(), nullptr, 0);
    else if (k == "--iters") iters = atoi(v.c_str());
    else if (k == "--dev") dev = atoi(v.c_str());
    else if (k == "--poll-sleep-us") pollSleepUs = atoi(v.c_str());
    else { fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  if (role != "a" && role != "b") {
    fprintf(stderr, "usage: ib_pair --role a|b [--dir DIR] [--case functional|deadpeer|bw|lat|waits] [--size N] [--iters N] [--dev N]\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  ib::setFlushHostMemoryForTesting(true);
  Conn c = establish();
  if (testCase == "functional") functional(c);
  else if (testCase == "bw") bandwidth(c);
  else if (testCase == "lat") latency(c);
  else if (testCase == "deadpeer") deadPeer(c);
  else if (testCase == "waits") waits(c);
  else die("unknown case %s", testCase.c_str());
  // Orderly close: both sides finish before tearing down (the peer may still be draining).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  printf("ib_pair[%s]: PASS %s\n", role.c_str(), testCase.c_str());
  return 0;
}
