// libFuzzer harness: a hostile receiver against a real TcpSendComm. The comm runs over socketpairs (control, lane 0
// and 0-3 helper lanes, each helper lane written by the comm's own thread; with two or more, optionally over two
// rails, where the failover is on: a helper lane that fails is given up and its pieces resent); the input is a
// script of the receiver's actions, decoded by SendHarness::act: isend (sizes across the eager, inline and split
// paths, a few tags) and test, clear-to-send records with fields from the input (biased to what an honest receiver
// writes: the next sequence number, the sends' tags and sizes, the credits it owes) or answering the queued sends
// honestly, lane-closed and receive-done records (biased to the lanes given up and the records sent), raw bytes,
// reading or not reading each lane, shrinking socket buffers, half-closing or closing lanes and the control socket.
// Every input ends with the comm closed, its threads joined and every socket closed.
//
// Invariants checked on everything the comm writes (a broken one aborts, so libFuzzer keeps the input):
//  - every piece header is well formed; a piece belongs to a clear-to-send record the receiver sent (sequence,
//    slot, index, tag, a size within the entry), the pieces of one entry agree on its size and never add up to
//    more, and the payload is the send buffer's bytes at the piece's offsets;
//  - over two rails: a lane is given up (lane-down on lane 0) at most once, and offered again only after; a piece
//    flagged resent comes only after a lane-closed record, on a helper lane, and is the only kind of piece whose
//    bytes may repeat; over one rail no failover header or resent piece at all;
//  - eager messages stay within the agreed limits: small ones on lane 0, large ones on helper lanes, numbers never
//    repeated and rising on each lane, never more than the credits given, horizons never past the records sent;
//  - a send reported done is never read again (its buffer is freed at once: ASan catches a later read);
//  - every error is an NCCL error code a peer may cause, never a crash, an internal error or a hang.
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/params.h"
#include "tcp_fuzz_common.h"
#include "tcp_fuzz_ops.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_lane.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {
namespace {
using namespace icn::fuzz;

using namespace icn::fuzz::send_ops;

constexpr int kMaxActions = 1024;
constexpr uint32_t kLaneEagerBytes = 65536;  // ICN_TCP_LANE_EAGER_BYTES for this harness (LLVMFuzzerInitialize)

uint32_t sendKey(int tag, uint32_t size) { return static_cast<uint32_t>(tag) * 2654435761u ^ size; }

bool peerCausable(Status st) {
  return st == Status::RemoteError || st == Status::InvalidUsage || st == Status::SystemError;
}

struct Send {
  Request* req = nullptr;
  std::unique_ptr<uint8_t[]> buf;
  uint32_t size = 0;
  int tag = 0;
  bool failed = false;
};

// What the comm writes on one lane, parsed as it arrives.
struct LaneStream {
  std::vector<uint8_t> in;
  bool inPayload = false;
  ChunkHeader h;
  uint32_t got = 0;  // payload bytes of h checked so far
  int64_t lastEager = -1;
  bool ended = false;
};

class SendHarness {
 public:
  explicit SendHarness(Input& in) {
    const uint8_t lanes = in.byte();
    helpers_ = lanes % 4;
    rails_ = (lanes & 0x80) && helpers_ >= 2;  // two rails: failover on (ICN_TCP_FAILOVER's default)
    const uint32_t eager = in.pick({16384, 2048, 0, 65536});
    Sockets s;
    s.eagerBytes = eager % (kMaxEagerBytes + 1);
    eagerBytes_ = s.eagerBytes;
    if (rails_) {
      s.railNames = {"fuzz0 -> a", "fuzz1 -> b"};
      for (int i = 0; i < 1 + helpers_; i++) s.laneRail.push_back(i % 2);
    }
    useLaneEager(!rails_);
    laneEagerBytes_ = rails_ ? 0 : kLaneEagerBytes;
    for (int i = 0; i < 2 + helpers_; i++) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) abort();
      commFds_.push_back(sv[0]);
      if (i == 0) s.control = Fd(sv[0]);
      else s.lanes.emplace_back(sv[0]);
      peer_.emplace_back(sv[1]);
    }
    streams_.resize(1 + helpers_);
    comm_ = std::make_unique<TcpSendComm>(std::move(s), "fuzz-receiver:1", NetCommInfo{});
    registerAsNccl(*comm_);
  }

  ~SendHarness() {
    comm_.reset();  // stops the helpers: nothing reads the buffers below once this returns
    reaper().drain();
  }

  void act(uint8_t op, Input& in) {
    bool moves = true;  // the action may make the helpers write
    switch (op) {
      case Isend: isend(in); break;
      case Test: test(in); break;
      case Cts: cts(in); break;
      case Answer: answer(in); break;
      case LaneClosed: {  // the receiver closed a helper lane: honestly one the sender gave up, once
        const uint8_t b = in.byte();
        LaneRecord r;
        r.lane = (b & 0x80) || downLanes_.empty() ? b % 6u : *std::next(downLanes_.begin(), b % downLanes_.size());
        if (in.byte() >= 0xF8) r.reserved = in.u32();
        if (writeLane0({reinterpret_cast<const uint8_t*>(&r), sizeof r})) closedWritten_++;
        break;
      }
      case Done: {  // a receive is whole: honestly one whose record was sent
        const uint32_t sent = static_cast<uint32_t>(records_.size());
        DoneRecord r;
        r.seq = in.pick({sent - 1, sent - 2, sent, 0});
        if (in.byte() >= 0xF8) r.reserved = in.u32();
        writeLane0({reinterpret_cast<const uint8_t*>(&r), sizeof r});
        break;
      }
      case Raw: {  // control or lane 0: the comm reads nothing else
        const uint8_t which = in.byte();
        auto bytes = in.bytes(in.byte() % 65);
        if (which & 1) writeLane0(bytes);
        else peer_[0].write(bytes);
        break;
      }
      case ReadLane: readLane(in.byte() % streams_.size()); break;
      case Reading: reading_ = !reading_; break;
      case Shrink: {
        const uint8_t which = in.byte();
        const int bytes = static_cast<int>(in.pick({1, 4096, 2048, 65536}));
        const size_t lane = 1 + (which >> 1) % (peer_.size() - 1);
        if (which & 1) shrinkBuffers(commFds_[lane], bytes, true, false);  // what the comm may have in flight
        else shrinkBuffers(peer_[lane].fd(), bytes, true, false);           // what we may have in flight
        moves = false;
        break;
      }
      case ShutLane: {
        const uint8_t b = in.byte();
        PeerSocket& p = peer_[1 + b % (peer_.size() - 1)];
        p.shutdown((b >> 4) % 3 == 0 ? SHUT_WR : (b >> 4) % 3 == 1 ? SHUT_RD : SHUT_RDWR);
        break;
      }
      case CloseLane: {
        const size_t lane = in.byte() % (peer_.size() - 1);
        peer_[1 + lane].close();
        streams_[lane].ended = true;
        break;
      }
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
      default: moves = false; break;
    }
    for (auto& p : peer_) p.flush();
    if (moves && helpers_ > 0 && live() > 0) {
      std::vector<int> fds;
      for (size_t i = 2; i < peer_.size(); i++)
        if (peer_[i].open()) fds.push_back(peer_[i].fd());
      settle(fds, &settleBudget_, false);
    }
    if (reading_)
      for (size_t i = 0; i < streams_.size(); i++) readLane(i);
  }

 private:
  size_t live() const {
    size_t n = 0;
    for (auto& s : sends_) n += !s->failed;
    return n;
  }

  void isend(Input& in) {
    auto s = std::make_unique<Send>();
    s->size = in.pick({100, 0, 1, 2048, 2049, 16384, 16385, 65536, 65537, 200000, 4096}) % (256u << 10);
    s->tag = static_cast<int>(in.pick({1, 2, 3, 7}));
    s->buf.reset(new uint8_t[s->size]);
    fillContent(s->buf.get(), sendKey(s->tag, s->size), 0, s->size);
    if (failed_ || sends_.size() >= static_cast<size_t>(kMaxRequests * kMaxRecvs)) return;
    sizes_.insert({s->tag, s->size});
    Status st = comm_->isend(s->size ? s->buf.get() : nullptr, s->size, s->tag, nullptr, &s->req);
    if (st != Status::Ok) {
      if (!peerCausable(st)) broken("isend returned status %d", static_cast<int>(st));
      if (s->req) broken("isend failed (status %d) but handed out a request", static_cast<int>(st));
      ICN_FUZZ_TRACE("isend failed: status %d", static_cast<int>(st));
      failed_ = true;
      parked_.push_back(std::move(s));  // its pieces may still be queued in the comm
      return;
    }
    if (!s->req) return;  // every request in flight: NCCL would try again
    sendLog_.push_back({s->tag, s->size});
    sends_.push_back(std::move(s));
  }

  void test(Input& in) {
    const uint8_t which = in.byte();
    const uint32_t times = in.pick({1, 4, 1, 32}) % 64;
    if (sends_.empty()) return;
    Send* s = sends_[which % sends_.size()].get();
    if (s->failed) return;
    for (uint32_t k = 0; k < times; k++) {
      bool done = false;
      int size = -7;
      Status st = s->req->test(&done, &size);
      if (st != Status::Ok) {
        if (!peerCausable(st)) broken("test returned status %d", static_cast<int>(st));
        ICN_FUZZ_TRACE("send of %u bytes (tag %d) failed: status %d", s->size, s->tag, static_cast<int>(st));
        s->failed = true;
        failed_ = true;
        return;
      }
      if (done) {
        if (size != static_cast<int>(s->size)) broken("send of %u bytes reported %d", s->size, size);
        ICN_FUZZ_TRACE("send of %u bytes (tag %d) done", s->size, s->tag);
        for (auto it = sends_.begin(); it != sends_.end(); ++it) {
          if (it->get() != s) continue;
          sends_.erase(it);  // frees the buffer: the comm must never read it again
          break;
        }
        return;
      }
      for (auto& p : peer_) p.flush();
    }
  }

  void writeCts(const CtsHeader& h, const CtsEntry* e, int n) {
    std::vector<uint8_t> bytes(sizeof h + n * sizeof(CtsEntry));
    memcpy(bytes.data(), &h, sizeof h);
    memcpy(bytes.data() + sizeof h, e, n * sizeof(CtsEntry));
    writeLane0(bytes);
  }

  // Queues bytes on lane 0 and follows them as the comm will parse them: the records it accepts, in order.
  bool writeLane0(std::span<const uint8_t> bytes) {
    if (!peer_[1].write(bytes)) return false;
    ctsOut_.insert(ctsOut_.end(), bytes.begin(), bytes.end());
    size_t off = 0;
    while (!ctsDead_ && ctsOut_.size() - off >= sizeof(CtsHeader)) {
      CtsHeader r;
      memcpy(&r, ctsOut_.data() + off, sizeof r);
      if (r.magic == kLaneMagic || r.magic == kDoneMagic) {
        // The failover's records, as large as a header: whether the comm takes one depends on what it gave up by
        // the time it reads it; one it refuses fails it, and it then answers no record after.
        static_assert(sizeof(LaneRecord) == sizeof(CtsHeader) && sizeof(DoneRecord) == sizeof(CtsHeader));
        off += sizeof r;
        continue;
      }
      std::string why;
      if (!validCts(r, static_cast<uint32_t>(records_.size()), &why)) {
        ctsDead_ = true;  // the comm fails on this record and reads no further
        break;
      }
      const size_t len = sizeof r + r.n * sizeof(CtsEntry);
      if (ctsOut_.size() - off < len) break;
      Record rec;
      rec.h = r;
      memcpy(rec.e, ctsOut_.data() + off + sizeof r, r.n * sizeof(CtsEntry));
      records_.push_back(rec);
      creditsGiven_ += r.credits;
      earlyGiven_ += r.earlyCredits;
      off += len;
    }
    ctsOut_.erase(ctsOut_.begin(), ctsOut_.begin() + static_cast<long>(off));
    if (ctsDead_) ctsOut_.clear();
    return true;
  }

  // Credits an honest receiver would hand back now: eager messages seen, less the credits already given.
  static uint8_t owed(uint64_t seen, uint64_t given) {
    return static_cast<uint8_t>(std::min<uint64_t>(255, seen - std::min(seen, given)));
  }
  uint8_t owedSmall() const { return owed(smallSeen_, creditsGiven_); }
  uint8_t owedEarly() const { return owed(earlySeen_, earlyGiven_); }

  // A record with fields from the input.
  void cts(Input& in) {
    CtsHeader h;
    const uint32_t next = static_cast<uint32_t>(records_.size());
    h.seq = in.pick({next, next, next + 1, next - 1});
    h.slot = static_cast<uint8_t>(in.pick({next % 32, 0, 31, 32}));
    const uint8_t nb = in.byte();
    h.n = static_cast<uint8_t>(nb < 0xF0 ? 1 + nb % kMaxRecvs : nb);
    h.credits = static_cast<uint8_t>(in.pick({0, owedSmall(), 1, 64, 65}));
    h.earlyCredits = static_cast<uint8_t>(in.pick({0, owedEarly(), 1, 192, 193}));
    if (in.byte() >= 0xF8) h.magic = in.u32();
    CtsEntry e[kMaxRecvs];
    const int n = std::min<int>(h.n, kMaxRecvs);
    for (int i = 0; i < n; i++) {
      const Send* s = sends_.empty() ? nullptr : sends_[in.byte() % sends_.size()].get();
      const uint32_t tag = s ? uint32_t(s->tag) : 1, size = s ? s->size : 100;
      e[i].tag = static_cast<int32_t>(in.pick({tag, tag, 1, 2, 3, 7}));
      e[i].size = in.pick({size, size, size + 100, size - 1, 0, kMaxMessage, 1u << 20});
    }
    writeCts(h, e, n);
  }

  // Honest records for the next k sends not answered yet, with the credits owed.
  void answer(Input& in) {
    const int k = 1 + in.byte() % kMaxRecvs;
    const uint8_t extra = in.byte();
    CtsHeader h;
    h.seq = static_cast<uint32_t>(records_.size());
    h.slot = static_cast<uint8_t>(h.seq % kMaxRequests);
    h.credits = owedSmall();
    h.earlyCredits = owedEarly();
    CtsEntry e[kMaxRecvs];
    int n = 0;
    for (; n < k && answered_ < issued(); n++, answered_++) {
      const auto& [tag, size] = issuedAt(answered_);
      e[n].tag = tag;
      e[n].size = size + (extra & 1 ? 0 : extra);
    }
    if (n == 0) return;
    h.n = static_cast<uint8_t>(n);
    writeCts(h, e, n);
  }
  size_t issued() const { return sendLog_.size(); }
  const std::pair<int, uint32_t>& issuedAt(size_t i) const { return sendLog_[i]; }

  // Reads what lane `i` carries now and checks every header and payload byte.
  void readLane(size_t i) {
    LaneStream& ls = streams_[i];
    if (ls.ended) return;
    if (!peer_[1 + i].read(&ls.in, 1 << 20)) ls.ended = true;
    size_t off = 0;
    for (;;) {
      if (!ls.inPayload) {
        if (ls.in.size() - off < sizeof(ChunkHeader)) break;
        memcpy(&ls.h, ls.in.data() + off, sizeof ls.h);
        off += sizeof ls.h;
        checkHeader(i, ls);
        ICN_FUZZ_TRACE("lane %zu: piece (flags %u) seq %u index %u tag %d [%u, +%u) of %u", i, ls.h.flags,
                       ls.h.seq, ls.h.index, ls.h.tag, ls.h.offset, ls.h.length, ls.h.total);
        ls.inPayload = ls.h.length > 0;
        ls.got = 0;
        continue;
      }
      const size_t take = std::min<size_t>(ls.h.length - ls.got, ls.in.size() - off);
      if (take == 0) break;
      const uint32_t key = sendKey(ls.h.tag, ls.h.total);
      const size_t d = firstDiff(ls.in.data() + off, key, ls.h.offset + ls.got, take);
      if (d != take)
        broken("lane %zu: byte %u of a %u-byte message (tag %d) is not the send buffer's", i, ls.h.offset + ls.got +
               static_cast<uint32_t>(d), ls.h.total, ls.h.tag);
      ls.got += static_cast<uint32_t>(take);
      off += take;
      if (ls.got == ls.h.length) ls.inPayload = false;
    }
    ls.in.erase(ls.in.begin(), ls.in.begin() + static_cast<long>(off));
  }

  void checkHeader(size_t lane, LaneStream& ls) {
    const ChunkHeader& h = ls.h;
    std::string why;
    if (!validChunk(h, kMaxMessage, &why)) broken("lane %zu: the comm wrote a bad header: %s", lane, why.c_str());
    if (h.flags & (kChunkLaneDown | kChunkLaneOffer)) return checkLaneNotice(lane, h);
    if (h.flags & kChunkResend) {  // the comm resends only what a lane-closed record let go, on helper lanes
      if (!rails_) broken("lane %zu: a resent piece on a connection over one rail", lane);
      if (closedWritten_ == 0) broken("lane %zu: a resent piece before any lane-closed record", lane);
      if (lane == 0) broken("lane 0: a resent piece");
    }
    if (!sizes_.count({h.tag, h.total}))
      broken("lane %zu: a %u-byte message with tag %d was never sent", lane, h.total, h.tag);
    if (h.flags & kChunkEager) {
      if (lane == 0 ? h.total > eagerBytes_ : (h.total <= eagerBytes_ || h.total > laneEagerBytes_))
        broken("lane %zu: eager message of %u bytes (limits: %u on lane 0, %u on helper lanes)", lane, h.total,
               eagerBytes_, laneEagerBytes_);
      if (!eagerNumbers_.insert(h.eager).second) broken("eager number %u sent twice", h.eager);
      if (static_cast<int64_t>(h.eager) <= ls.lastEager) broken("lane %zu: eager number %u after %lld", lane, h.eager,
                                                                static_cast<long long>(ls.lastEager));
      ls.lastEager = h.eager;
      if (h.seq > records_.size()) broken("eager message with horizon %u, %zu records sent", h.seq, records_.size());
      (lane == 0 ? smallSeen_ : earlySeen_)++;
      if (smallSeen_ > kEagerCredits + creditsGiven_ || earlySeen_ > kEarlyCredits + earlyGiven_)
        broken("%llu + %llu eager messages for %llu + %llu credits", (unsigned long long)smallSeen_,
               (unsigned long long)earlySeen_, (unsigned long long)(kEagerCredits + creditsGiven_),
               (unsigned long long)(kEarlyCredits + earlyGiven_));
      return;
    }
    if (h.seq >= records_.size())
      broken("lane %zu: piece for record %u, %zu records sent", lane, h.seq, records_.size());
    const Record& r = records_[h.seq];
    if (h.slot != r.h.slot || h.index >= r.h.n || h.tag != r.e[h.index].tag || h.total > r.e[h.index].size)
      broken("lane %zu: piece (slot %u index %u tag %d, %u bytes) does not fit record %u", lane, h.slot, h.index, h.tag,
             h.total, h.seq);
    auto [it, fresh] = entries_.try_emplace(uint64_t{h.seq} << 8 | h.index, std::pair<uint32_t, uint64_t>{h.total, 0});
    if (it->second.first != h.total)
      broken("record %u entry %u: pieces of %u and %u bytes (two sends on one entry)", h.seq, h.index,
             it->second.first, h.total);
    if (h.flags & kChunkResend) return;  // bytes that may have come before on the lane given up
    it->second.second += h.length;
    if (it->second.second > h.total)
      broken("record %u entry %u: %llu bytes for a %u-byte message", h.seq, h.index,
             (unsigned long long)it->second.second, h.total);
  }

  // A lane-down or lane-offer header: on lane 0, over two rails, for a helper lane; each lane given up once (an
  // offer is never taken here, so a lane given up stays so) and offered only once given up.
  void checkLaneNotice(size_t lane, const ChunkHeader& h) {
    const bool down = h.flags & kChunkLaneDown;
    ICN_FUZZ_TRACE("lane %zu: lane %s for lane %u", lane, down ? "down" : "offer", h.slot);
    if (!rails_) broken("lane %zu: a lane %s header on a connection over one rail", lane, down ? "down" : "offer");
    if (lane != 0) broken("lane %zu: a lane %s header on a helper lane", lane, down ? "down" : "offer");
    if (h.slot > static_cast<uint32_t>(helpers_)) broken("lane %s for lane %u of %d", down ? "down" : "offer", h.slot,
                                                         helpers_);
    if (down && !downLanes_.insert(h.slot).second) broken("lane %u given up twice", h.slot);
    if (!down && !downLanes_.count(h.slot)) broken("lane %u offered again, never given up", h.slot);
  }

  struct Record {
    CtsHeader h;
    CtsEntry e[kMaxRecvs];
  };
  // Failover needs no message held in a lane's socket: over two rails large messages never go eager. Between
  // inputs no comm runs, so the parameters may be read again.
  static void useLaneEager(bool on) {
    static bool current = true;  // as LLVMFuzzerInitialize set it
    if (on == current) return;
    setenv("ICN_TCP_LANE_EAGER_BYTES", on ? "65536" : "0", 1);
    params::reloadForTesting();
    current = on;
  }

  int helpers_ = 0;
  bool rails_ = false;
  uint32_t laneEagerBytes_ = kLaneEagerBytes;
  std::set<uint32_t> downLanes_;  // helper lanes the comm gave up (lane-down headers read on lane 0)
  uint32_t closedWritten_ = 0;    // lane-closed records written
  uint32_t eagerBytes_ = 0;
  std::vector<PeerSocket> peer_;  // control, lane 0, helper lanes
  std::vector<int> commFds_;      // the comm's ends, same order (owned by the comm)
  std::vector<std::unique_ptr<Send>> sends_, parked_;  // before comm_: buffers outlive it
  std::unique_ptr<TcpSendComm> comm_;
  std::vector<LaneStream> streams_;
  std::set<std::pair<int, uint32_t>> sizes_;  // (tag, size) of every send
  std::vector<std::pair<int, uint32_t>> sendLog_;
  size_t answered_ = 0;
  std::vector<uint8_t> ctsOut_;  // record bytes written but not yet complete
  bool ctsDead_ = false;
  std::vector<Record> records_;  // as the comm accepts them, by sequence number
  uint64_t creditsGiven_ = 0, earlyGiven_ = 0, smallSeen_ = 0, earlySeen_ = 0;
  std::set<uint32_t> eagerNumbers_;
  std::map<uint64_t, std::pair<uint32_t, uint64_t>> entries_;  // (seq, index) -> size, bytes seen
  bool failed_ = false, reading_ = false;
  std::chrono::microseconds settleBudget_{200000};
};

}  // namespace
}  // namespace icn::tcp

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::fuzz::quietLogs();
  icn::fuzz::fillCounterRegistry();
  setenv("ICN_PEER_TIMEOUT_MS", "5", 1);
  // Every path with small messages: split above 2 KiB in pieces of 4 KiB, large eager ones up to 64 KiB.
  setenv("ICN_TCP_INLINE_BYTES", "2048", 1);
  setenv("ICN_TCP_CHUNK_BYTES", "4096", 1);
  setenv("ICN_TCP_LANE_EAGER_BYTES", "65536", 1);
  setenv("ICN_TCP_EARLY_LANES", "2", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  icn::fuzz::Input in(data, size);
  icn::tcp::SendHarness h(in);
  icn::fuzz::runScript(in, icn::tcp::kOps, icn::tcp::Repeat, icn::tcp::kMaxActions,
                       [&](uint8_t op, icn::fuzz::Input& args) { h.act(op, args); });
  return 0;
}
