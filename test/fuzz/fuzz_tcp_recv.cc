// libFuzzer harness: a hostile sender against a real TcpRecvComm. The comm runs over socketpairs (control, lane 0
// and 0-3 helper lanes, each helper lane read by the comm's own thread; with two or more, optionally over two rails,
// where the failover messages are allowed: lane-down records and resent pieces); the input is a script of the sender's
// actions, decoded by RecvHarness::act: post receives (as NCCL would: 1-8 grouped, tags, sizes), test them, write
// message pieces and eager messages on any lane (header fields biased to what an honest sender would write:
// the posted receive's sequence, slot, index, tag and size, the next eager number, the current horizon), write
// raw bytes, read or stop reading the clear-to-send records, shrink socket buffers, half-close or close lanes and
// the control socket. Every input ends with the comm closed, its threads joined and every socket closed.
//
// Invariants checked (a broken one aborts, so libFuzzer keeps the input):
//  - a receive reported complete holds, in [0, size), exactly the bytes one message sent for that entry carries
//    at those offsets (pieces for the entry, or one eager message with its tag and size), and nothing past size;
//    its buffer is freed at once, so a later write into it is a use-after-free;
//  - every record on lane 0 is a clear-to-send record its receive asked for (sequence, slot, count, tags, sizes),
//    a lane-closed record for a lane the script gave up, or a receive-done record for a posted receive; and the
//    credits handed back never exceed the eager messages sent (those the harness wrote, plus as many as the raw
//    bytes it wrote on the lanes could hold);
//  - every error is an NCCL error code a peer may cause (RemoteError, InvalidUsage, SystemError), never a crash,
//    an internal error or a hang (libFuzzer's -timeout).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "tcp_fuzz_common.h"
#include "tcp_fuzz_ops.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_lane.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {
namespace {
using namespace icn::fuzz;

using namespace icn::fuzz::recv_ops;

constexpr size_t kMaxPosted = 256 << 10;   // largest receive buffer the harness posts
constexpr size_t kMaxPayload = 256 << 10;  // largest payload it writes after one header
constexpr int kMaxActions = 1024;

uint32_t directKey(uint32_t seq, uint32_t index) { return (seq << 3 | (index & 7)) * 2 + 1; }
uint32_t eagerKey(uint32_t number) { return number * 2; }

bool peerCausable(Status st) {
  return st == Status::RemoteError || st == Status::InvalidUsage || st == Status::SystemError;
}

struct Posted {
  Request* req = nullptr;
  uint32_t seq = 0;
  int slot = 0;
  int n = 0;
  int tags[kMaxRecvs] = {};
  size_t sizes[kMaxRecvs] = {};
  std::unique_ptr<uint8_t[]> bufs[kMaxRecvs];  // null: posted without a buffer
  bool failed = false;
};

// What a clear-to-send record must say: the receive as it was posted.
struct Expected {
  int slot = 0;
  int n = 0;
  int tags[kMaxRecvs] = {};
  uint32_t sizes[kMaxRecvs] = {};
};

struct SentMessage {  // a message (or a piece of one) the harness wrote, for the completion check
  uint32_t seq, slot, index, total;
  int tag;
  bool eager;
  uint32_t number;
};

class RecvHarness {
 public:
  explicit RecvHarness(Input& in) {
    const uint8_t lanes = in.byte();
    helpers_ = lanes % 4;
    rails_ = (lanes & 0x80) && helpers_ >= 2;  // two rails: failover on (ICN_TCP_FAILOVER's default)
    const uint32_t eager = in.pick({16384, 2048, 0, 65536, 1024});
    Sockets s;
    s.eagerBytes = eager % (kMaxEagerBytes + 1);
    eagerBytes_ = s.eagerBytes;
    for (int i = 0; i < 2 + helpers_; i++) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) abort();
      commFds_.push_back(sv[0]);
      if (i == 0) s.control = Fd(sv[0]);
      else s.lanes.emplace_back(sv[0]);
      peer_.emplace_back(sv[1]);
    }
    if (rails_) {
      s.railNames = {"fuzz0 <- a", "fuzz1 <- b"};
      for (int i = 0; i < 1 + helpers_; i++) s.laneRail.push_back(i % 2);
    }
    for (int i = kMaxRequests - 1; i >= 0; i--) freeSlots_.push_back(i);
    comm_ = std::make_unique<TcpRecvComm>(std::move(s), "fuzz-sender:1", NetCommInfo{});
    registerAsNccl(*comm_);
    int size = 0;
    Request* flush = nullptr;
    void* data = nullptr;
    if (comm_->iflush(1, &data, &size, nullptr, &flush) != Status::Ok || flush) broken("iflush of host memory");
  }

  ~RecvHarness() {
    comm_.reset();  // stops the helpers: nothing writes into the buffers below once this returns
    reaper().drain();
  }

  void act(uint8_t op, Input& in) {
    switch (op) {
      case Post: post(in); break;
      case Test: test(in); break;
      case Piece: piece(in); break;
      case Resend: piece(in, kChunkResend); break;
      case LaneDown: {  // the sender gives up a helper lane (any lane number from 0xF0 on)
        const uint8_t b = in.byte();
        ChunkHeader h;
        h.flags = kChunkLaneDown;
        h.slot = static_cast<uint8_t>(b >= 0xF0 ? b : 1 + b % std::max(helpers_, 1));
        if (h.slot >= 1 && h.slot <= helpers_) gaveUp_ |= 1u << h.slot;
        writePiece(0, h, 0, false);
        break;
      }
      case Message: message(in); break;
      case Eager: eager(in); break;
      case Raw: {
        const size_t which = in.byte() % peer_.size();
        const auto raw = in.bytes(in.byte() % 65);
        peer_[which].write(raw);
        if (which > 0) {
          tainted_ = true;  // a lane's stream no longer matches what the harness knows it holds
          // The fuzzer learns the header's magic: raw bytes may start eager headers the harness did not write, at
          // most one per header length of them (headers do not overlap; a payload's bytes never hold the magic).
          const uint32_t headers = static_cast<uint32_t>((raw.size() + sizeof(ChunkHeader) - 1) / sizeof(ChunkHeader));
          (which == 1 ? rawHeadersOnLane0_ : rawHeadersOnHelpers_) += headers;
        }
        break;
      }
      case ReadCts: readCts(); break;
      case Reading: reading_ = !reading_; break;
      case Shrink: {
        const uint8_t which = in.byte();
        const int bytes = static_cast<int>(in.pick({1, 4096, 2048, 65536}));
        if (which & 1) shrinkBuffers(commFds_[1], bytes, true, false);  // the comm's clear-to-send writes
        else shrinkBuffers(peer_[1 + (which >> 1) % (peer_.size() - 1)].fd(), bytes, true, false);
        break;
      }
      case ShutLane: {
        const uint8_t b = in.byte();
        const int how = (b >> 4) % 3 == 0 ? SHUT_WR : (b >> 4) % 3 == 1 ? SHUT_RD : SHUT_RDWR;
        peer_[1 + b % (peer_.size() - 1)].shutdown(how);
        break;
      }
      case CloseLane: peer_[1 + in.byte() % (peer_.size() - 1)].close(); break;
      case Control: {
        const uint8_t b = in.byte();
        if (b % 3 == 0) peer_[0].close();
        else if (b % 3 == 1) peer_[0].shutdown(SHUT_WR);
        else {
          auto text = in.bytes(in.byte() % 40);
          std::vector<uint8_t> notice{0xF7, static_cast<uint8_t>(text.size())};
          notice.insert(notice.end(), text.begin(), text.end());
          peer_[0].write(notice);
        }
        break;
      }
      case Pause: {
        const auto us = std::chrono::microseconds(in.pick({50, 200, 1000}) % 2000);
        if (settleBudget_ > us) {
          usleep(static_cast<useconds_t>(us.count()));
          settleBudget_ -= us;
        }
        break;
      }
      default: break;
    }
    afterAction();
  }

 private:
  void afterAction() {
    for (auto& p : peer_) p.flush();
    if (reading_) readCts();
    std::vector<int> helperFds(commFds_.begin() + 2, commFds_.end());
    settle(helperFds, &settleBudget_);
  }

  Posted* target(uint8_t b) { return posted_.empty() ? nullptr : posted_[b % posted_.size()].get(); }

  void post(Input& in) {
    const uint8_t sel = in.byte();
    const int n = sel < 160 ? 1 : 1 + sel % kMaxRecvs;
    const uint8_t nulls = in.byte();
    auto p = std::make_unique<Posted>();
    p->n = n;
    for (int i = 0; i < n; i++) {
      p->tags[i] = static_cast<int>(in.pick({1, 2, 3, 7, 0}));
      p->sizes[i] = in.pick({100, 1000, 0, 1, 4096, 16384, 65536, 65537, 200000, 2048}) % (kMaxPosted + 1);
      if ((nulls & 0xC0) == 0xC0 && (nulls >> i & 1)) p->sizes[i] = 0;  // NCCL posts size 0 without a buffer
      else p->bufs[i].reset(new uint8_t[p->sizes[i]]);
    }
    postReceive(std::move(p));
  }

  void postReceive(std::unique_ptr<Posted> p) {
    if (failed_ || posted_.size() >= static_cast<size_t>(kMaxRequests)) return;  // NCCL posts no more
    void* data[kMaxRecvs];
    for (int i = 0; i < p->n; i++) {
      if (p->bufs[i]) memset(p->bufs[i].get(), kPoison, p->sizes[i]);
      data[i] = p->bufs[i].get();
    }
    p->seq = nextSeq_++;
    p->slot = freeSlots_.back();
    freeSlots_.pop_back();
    Expected e;
    e.slot = p->slot;
    e.n = p->n;
    for (int i = 0; i < p->n; i++) {
      e.tags[i] = p->tags[i];
      e.sizes[i] = static_cast<uint32_t>(std::min<size_t>(p->sizes[i], kMaxMessage));
    }
    expected_.push_back(e);
    Status st = comm_->irecv(p->n, data, p->sizes, p->tags, nullptr, &p->req);
    if (st != Status::Ok) {
      if (!peerCausable(st)) broken("irecv returned status %d", static_cast<int>(st));
      if (p->req) broken("irecv failed (status %d) but handed out a request", static_cast<int>(st));
      ICN_FUZZ_TRACE("irecv failed: status %d", static_cast<int>(st));
      failed_ = true;
      parked_.push_back(std::move(p));  // the comm may still hold its buffers
      return;
    }
    if (!p->req) broken("irecv returned Ok without a request");
    posted_.push_back(std::move(p));
  }

  void test(Input& in) {
    Posted* t = target(in.byte());
    const uint32_t times = in.pick({1, 4, 1, 32}) % 64;
    for (uint32_t k = 0; k < times && t && !t->failed; k++) {
      if (testOnce(t)) return;
      for (auto& p : peer_) p.flush();
      std::vector<int> helperFds(commFds_.begin() + 2, commFds_.end());
      settle(helperFds, &settleBudget_);
    }
  }

  // One test() of t; true when it finished (done or failed).
  bool testOnce(Posted* t) {
    bool done = false;
    int sizes[kMaxRecvs];
    for (auto& s : sizes) s = -7;
    Status st = t->req->test(&done, sizes);
    if (st != Status::Ok) {
      if (!peerCausable(st)) broken("test returned status %d", static_cast<int>(st));
      ICN_FUZZ_TRACE("receive %u failed: status %d", t->seq, static_cast<int>(st));
      t->failed = true;
      failed_ = true;
      return true;
    }
    if (done) complete(t, sizes);
    return done;
  }

 public:
  // The comm owes every clear-to-send record it queued: once lane 0 is read again they arrive, in order and
  // intact (readCts checks each). Receives drive the comm's sending: a live one is tested, or an empty one posted.
  void finish() {
    if (!lanePeer(0).open()) return;
    uint32_t seen = ctsSeen_;
    for (int round = 0, still = 0; round < 64 && !failed_ && ctsSeen_ < expected_.size() && still < 4; round++) {
      readCts();
      Posted* live = nullptr;
      for (auto& p : posted_)
        if (!p->failed && !live) live = p.get();
      if (live) {
        testOnce(live);
      } else {
        auto p = std::make_unique<Posted>();
        p->n = 1;
        postReceive(std::move(p));
      }
      still = ctsSeen_ == seen ? still + 1 : 0;
      seen = ctsSeen_;
    }
    readCts();
  }

 private:
  // The receive `t` was reported done with `sizes`: check every entry, then hand its buffers back (freed: a
  // lane that still wrote into them would be caught by ASan).
  void complete(Posted* t, const int* sizes) {
    ICN_FUZZ_TRACE("receive %u (%d entries) done: entry 0 holds %d bytes", t->seq, t->n, sizes[0]);
    for (int i = 0; i < t->n; i++) {
      const int s = sizes[i];
      if (s < 0 || static_cast<size_t>(s) > t->sizes[i])
        broken("receive %u entry %d completed with size %d (posted %zu bytes)", t->seq, i, s, t->sizes[i]);
      const uint8_t* b = t->bufs[i].get();
      if (!b) continue;
      const size_t past = static_cast<size_t>(s) + firstWritten(b + s, t->sizes[i] - static_cast<size_t>(s));
      if (past != t->sizes[i])
        broken("receive %u entry %d: byte %zu written past its %d-byte message", t->seq, i, past, s);
      if (tainted_ || s == 0) continue;
      const uint32_t us = static_cast<uint32_t>(s);
      // The bytes of a direct message for this entry, or of an eager message with its tag and size. Both are
      // checked: a short message's content may match both keys (7 bits of content per byte).
      bool ok = false;
      const size_t diff = firstDiff(b, directKey(t->seq, i), 0, us);
      if (diff == us)
        for (auto& m : sent_)
          ok = ok || (!m.eager && m.seq == t->seq && m.slot == static_cast<uint32_t>(t->slot) &&
                      m.index == static_cast<uint32_t>(i) && m.total == us && m.tag == t->tags[i]);
      for (auto& m : sent_)
        if (!ok && m.eager && m.tag == t->tags[i] && m.total == us && firstDiff(b, eagerKey(m.number), 0, us) == us)
          ok = true;
      if (ok) continue;
      if (diff == us)
        broken("receive %u entry %d completed with %d bytes, but no message sent for it has that size", t->seq, i, s);
      broken("receive %u entry %d (tag %d) completed with %d bytes that no message sent for it holds (byte %zu is "
             "0x%02x: %s)", t->seq, i, t->tags[i], s, diff, b[diff], b[diff] == kPoison ? "never written" : "other data");
    }
    freeSlots_.push_back(t->slot);
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
      if (it->get() != t) continue;
      posted_.erase(it);  // frees the buffers
      break;
    }
  }

  int lane(uint8_t b) const { return b % (1 + helpers_); }
  PeerSocket& lanePeer(int lane) { return peer_[1 + lane]; }

  void writePiece(int lane, const ChunkHeader& h, uint32_t key, bool truncate) {
    size_t payload = h.length;
    if (payload > kMaxPayload) {
      payload = kMaxPayload;
      tainted_ = true;  // the stream no longer matches its headers
    }
    if (truncate) {
      payload /= 2;
      tainted_ = true;
    }
    std::unique_ptr<uint8_t[]> bytes(new uint8_t[sizeof h + payload]);
    memcpy(bytes.get(), &h, sizeof h);
    fillContent(bytes.get() + sizeof h, key, h.offset, payload);
    if (!lanePeer(lane).write(bytes.get(), sizeof h + payload)) return;
    if (h.flags & (kChunkLaneDown | kChunkLaneOffer)) return;  // a record, not a message
    if (h.flags & kChunkEager) (lane == 0 ? eagerOnLane0_ : eagerOnHelpers_)++;
    sent_.push_back({h.seq, h.slot, h.index, h.total, h.tag, (h.flags & kChunkEager) != 0, h.eager});
  }

  void piece(Input& in, uint16_t flags = 0) {
    const int ln = lane(in.byte());
    Posted* t = target(in.byte());
    ChunkHeader h;
    if (t) {
      h.seq = in.pick({t->seq, t->seq, t->seq + 1, t->seq - 1, nextSeq_});
      h.slot = static_cast<uint8_t>(in.pick({uint32_t(t->slot), uint32_t(t->slot), uint32_t(t->slot + 1) % 32}));
      const uint8_t ib = in.byte();
      h.index = static_cast<uint8_t>(ib < 0xF0 ? ib % t->n : ib);
      const int tag = t->tags[h.index % t->n];
      h.tag = static_cast<int32_t>(in.pick({uint32_t(tag), uint32_t(tag), uint32_t(tag) + 1}));
      const uint32_t sz = static_cast<uint32_t>(t->sizes[h.index % t->n]);
      h.total = in.pick({sz, sz, sz / 2, sz + 1, 0, 1});
    } else {
      h.seq = in.pick({nextSeq_, 0});
      h.slot = static_cast<uint8_t>(in.pick({0, 1}));
      h.index = static_cast<uint8_t>(in.byte() % kMaxRecvs);
      h.tag = static_cast<int32_t>(in.pick({1, 2, 3, 7}));
      h.total = in.pick({100, 1000, 0});
    }
    // Which piece: piece k of m equal ones, a piece overlapping the first half, or raw offset and length.
    const uint8_t scheme = in.byte();
    if (scheme >= 0xE0) {
      h.offset = in.u32();
      h.length = in.u32();
    } else if (scheme >= 0xC0) {
      h.offset = h.total / 4;
      h.length = h.total / 2;
    } else {
      const uint32_t m = 1 + (scheme & 3), k = (scheme >> 2) % m;
      h.offset = h.total / m * k;
      h.length = k == m - 1 ? h.total - h.offset : h.total / m;
    }
    const uint8_t mut = in.byte();
    if (mut >= 0xF8) h.magic = in.u32();
    h.flags = flags;
    if (mut >= 0xF0 && mut < 0xF8) h.flags = in.u16();
    if (h.flags & kChunkEager) h.eager = in.u32();
    writePiece(ln, h, (h.flags & kChunkEager) ? eagerKey(h.eager) : directKey(h.seq, h.index), mut == 0xEF);
  }

  // A whole message for one entry of a posted receive, as an honest sender splits it: m pieces over the lanes.
  void message(Input& in) {
    Posted* t = target(in.byte());
    const uint8_t b = in.byte();
    const uint8_t lanes = in.byte();
    if (!t) return;
    const int i = b % t->n;
    const uint32_t sz = static_cast<uint32_t>(std::min<size_t>(t->sizes[i], kMaxMessage));
    const uint32_t total = in.pick({sz, sz, sz / 2, 0, 1}) % (sz + 1);
    const uint32_t m = 1 + (b >> 3) % 4;
    const bool reversed = b & 0x80;
    for (uint32_t k = 0; k < m; k++) {
      const uint32_t p = reversed ? m - 1 - k : k;
      ChunkHeader h;
      h.seq = t->seq;
      h.slot = static_cast<uint8_t>(t->slot);
      h.index = static_cast<uint8_t>(i);
      h.tag = t->tags[i];
      h.total = total;
      h.offset = total / m * p;
      h.length = p == m - 1 ? total - h.offset : total / m;
      writePiece(lane(static_cast<uint8_t>(lanes + k)), h, directKey(h.seq, h.index), false);
    }
  }

  void eager(Input& in) {
    const int ln = lane(in.byte() < 0xA0 ? 0 : in.byte());
    ChunkHeader h;
    h.flags = kChunkEager;
    h.eager = in.pick({nextEager_, nextEager_, nextEager_ + 1, nextEager_ - 1});
    h.seq = in.pick({nextSeq_, ctsSeen_, 0, nextSeq_ + 1, nextSeq_ - 1});
    Posted* t = target(in.byte());
    const uint32_t tag = t ? uint32_t(t->tags[0]) : 1;
    h.tag = static_cast<int32_t>(in.pick({tag, 1, 2, 3, 7}));
    h.total = h.length = in.pick({100, 0, 1, 1000, eagerBytes_, eagerBytes_ + 1, 4096, 16384, 65536, 100000});
    if (h.eager == nextEager_) nextEager_++;
    writePiece(ln, h, eagerKey(h.eager), false);
  }

  // Reads the clear-to-send records lane 0 has carried so far and checks each against its receive.
  void readCts() {
    lanePeer(0).read(&ctsIn_, 1 << 16);
    size_t off = 0;
    while (ctsIn_.size() - off >= sizeof(CtsHeader)) {
      CtsHeader h;
      memcpy(&h, ctsIn_.data() + off, sizeof h);
      if (h.magic == kLaneMagic || h.magic == kDoneMagic) {  // the failover's records: the same size as a header
        static_assert(sizeof(LaneRecord) == sizeof h && sizeof(DoneRecord) == sizeof h);
        checkFailoverRecord(ctsIn_.data() + off);
        off += sizeof h;
        continue;
      }
      if (h.magic != kCtsMagic || h.seq != ctsSeen_ || h.n < 1 || h.n > kMaxRecvs)
        broken("clear-to-send record %u: magic 0x%x, seq %u, %u receives", ctsSeen_, h.magic, h.seq, h.n);
      const size_t len = sizeof h + h.n * sizeof(CtsEntry);
      if (ctsIn_.size() - off < len) break;
      if (ctsSeen_ >= expected_.size()) broken("clear-to-send record %u for a receive never posted", h.seq);
      const Expected& e = expected_[ctsSeen_];
      if (h.slot != e.slot || h.n != e.n)
        broken("clear-to-send record %u: slot %u, %u receives (posted: slot %d, %d)", h.seq, h.slot, h.n, e.slot, e.n);
      for (int i = 0; i < h.n; i++) {
        CtsEntry ce;
        memcpy(&ce, ctsIn_.data() + off + sizeof h + i * sizeof ce, sizeof ce);
        if (ce.tag != e.tags[i] || ce.size != e.sizes[i])
          broken("clear-to-send record %u entry %d: tag %d size %u (posted: tag %d size %u)", h.seq, i, ce.tag, ce.size,
                 e.tags[i], e.sizes[i]);
      }
      creditsBack_ += h.credits;
      earlyBack_ += h.earlyCredits;
      const uint64_t lane0 = uint64_t{eagerOnLane0_} + rawHeadersOnLane0_;
      const uint64_t helpers = uint64_t{eagerOnHelpers_} + rawHeadersOnHelpers_;
      if (creditsBack_ > lane0 || earlyBack_ > helpers)
        broken("clear-to-send records hand back %llu + %llu credits for at most %llu + %llu eager messages sent",
               (unsigned long long)creditsBack_, (unsigned long long)earlyBack_, (unsigned long long)lane0,
               (unsigned long long)helpers);
      ctsSeen_++;
      off += len;
    }
    ctsIn_.erase(ctsIn_.begin(), ctsIn_.begin() + static_cast<long>(off));
  }

  // A lane-closed record names a lane the script gave up (once: a lane is closed once), and only over two rails; a
  // receive-done record names a receive that was posted.
  void checkFailoverRecord(const uint8_t* at) {
    uint32_t magic = 0;
    memcpy(&magic, at, sizeof magic);
    if (!rails_) broken("a failover record (magic 0x%x) on a connection over one rail", magic);
    if (magic == kLaneMagic) {
      LaneRecord l;
      memcpy(&l, at, sizeof l);
      if (l.lane < 1 || l.lane > static_cast<uint32_t>(helpers_) || !(gaveUp_ >> l.lane & 1) || (closed_ >> l.lane & 1))
        broken("lane-closed record for lane %u (given up: 0x%x, closed already: 0x%x)", l.lane, gaveUp_, closed_);
      closed_ |= 1u << l.lane;
      return;
    }
    DoneRecord d;
    memcpy(&d, at, sizeof d);
    if (d.seq >= nextSeq_) broken("receive-done record for receive %u, never posted (%u posted)", d.seq, nextSeq_);
  }

  int helpers_ = 0;
  bool rails_ = false;
  uint32_t gaveUp_ = 0, closed_ = 0;  // bit per helper lane: a lane-down sent for it; its lane-closed record read
  uint32_t eagerBytes_ = 0;
  std::vector<PeerSocket> peer_;  // control, lane 0, helper lanes
  std::vector<int> commFds_;      // the comm's ends, same order (owned by the comm)
  std::vector<std::unique_ptr<Posted>> posted_, parked_;  // before comm_: buffers outlive it
  std::unique_ptr<TcpRecvComm> comm_;
  std::vector<int> freeSlots_;  // the comm's request pool, as FixedPool hands it out
  std::vector<Expected> expected_;
  std::vector<SentMessage> sent_;
  uint32_t nextSeq_ = 0, nextEager_ = 0, ctsSeen_ = 0;
  uint32_t eagerOnLane0_ = 0, eagerOnHelpers_ = 0;
  uint32_t rawHeadersOnLane0_ = 0, rawHeadersOnHelpers_ = 0;  // headers raw bytes may hold, at most
  uint64_t creditsBack_ = 0, earlyBack_ = 0;
  std::vector<uint8_t> ctsIn_;
  bool failed_ = false, tainted_ = false, reading_ = false;
  std::chrono::microseconds settleBudget_{200000};
};

}  // namespace
}  // namespace icn::tcp

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::fuzz::quietLogs();
  icn::fuzz::fillCounterRegistry();
  setenv("ICN_PEER_TIMEOUT_MS", "5", 1);  // a closed control socket fails the comm within the input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  icn::fuzz::Input in(data, size);
  icn::tcp::RecvHarness h(in);
  icn::fuzz::runScript(in, icn::tcp::kOps, icn::tcp::Repeat, icn::tcp::kMaxActions,
                       [&](uint8_t op, icn::fuzz::Input& args) { h.act(op, args); });
  h.finish();
  return 0;
}
