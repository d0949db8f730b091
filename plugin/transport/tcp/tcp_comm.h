// TCP send and receive comms (wire format in tcp_wire.h). Host memory only: pieces are written from and read
// into NCCL's buffers directly. The proxy thread matches sends to clear-to-send records, writes small messages
// and reads lane 0 itself; helper threads move the pieces of large messages on the other lanes.
#pragma once
#include <array>
#include <bitset>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/fixed_pool.h"
#include "core/handshake.h"
#include "core/oob.h"
#include "core/net_counters.h"
#include "core/socket.h"
#include "core/transport.h"
#include "diagnose/watch.h"
#include "transport/tcp/tcp_lane.h"
#include "transport/tcp/tcp_tending.h"

namespace icn::tcp {

// The fd of every socket of one connection, as the handshake left them, and what the two ends agreed.
struct Sockets {
  Fd control;
  std::vector<Fd> lanes;  // lane 0 first
  uint32_t eagerBytes = 0;
  std::vector<int> laneRail;           // per lane: its rail, an index into railNames
  std::vector<std::string> railNames;  // "eth1 -> 10.0.1.2"
  uint8_t token[kTokenSize] = {};      // the connection's, repeated by every lane's handshake
  // Lane 0's second copy, on another rail (tcp_lane0.h); invalid when lane 0 runs on one socket.
  Fd lane0Copy;
  int lane0CopyRail = 0;  // its rail, an index into railNames
};

// Lane 0's staging buffer holds a whole small message with its header, so one read brings it in.
constexpr size_t kLane0Stage = 64 * 1024 + sizeof(ChunkHeader);
// How far lane 0's two copies (tcp_lane0.h) may drift apart, per direction: small messages one way, records the
// other.
constexpr size_t kMirrorSendRing = 256 * 1024;
constexpr size_t kMirrorRecvRing = 64 * 1024;

struct Tuning {
  size_t inlineBytes = 0;  // messages up to this size go on lane 0
  size_t chunkBytes = 0;   // smallest piece of a split message
  size_t laneEagerBytes = 0;  // messages up to this size may go eager on a helper lane
  int earlyLanes = 1;         // helper lanes that unresolved eager messages may occupy
};
Tuning currentTuning();

class CommCore {
 public:
  CommCore(Sockets& s, std::string peer, NetCommInfo info);
  ~CommCore();
  Status regMr(void* data, size_t size, int type, void** mh);
  Status deregMr(void* mh);

 protected:
  // Ok while the connection is usable; otherwise the error (logged once, naming the peer). peerClosed: the
  // data lanes say the peer has closed its side.
  Status checkPeer(bool peerClosed, int pending);

  // Lane 0 on two rails when the handshake set up its copy (a ring of ringBytes for what this end writes).
  void startMirror(Sockets& s, size_t ringBytes);
  // Where lane 0's bytes come from: its copies, or its one socket.
  ByteSource& lane0In() { return mirror_ ? static_cast<ByteSource&>(*mirror_) : lane0Source_; }

  FailureState failure_;
  ControlChannel control_;
  Fd lane0_;
  Fd lane0Copy_;
  SocketSource lane0Source_;
  std::unique_ptr<Lane0Mirror> mirror_;
  bool controlLost_ = false;  // the control socket died while lane 0 went on over another rail (logged once)
  std::shared_ptr<NetCounters> counters_;
  Tuning tuning_;
  // How long a lane may wait on a peer that must be reading it (ICN_PEER_TIMEOUT_MS).
  std::chrono::milliseconds peerTimeout_;
  std::chrono::steady_clock::time_point peerGoneAt_{};
  // The diagnosis's view of this connection: every request's post, clear-to-send or first byte and completion,
  // from the proxy thread (diagnose/link_monitor.h).
  std::unique_ptr<diagnose::ConnectionWatch> watch_;
  // Recovery of a given-up lane: the connection's token and communicator, each lane's two ends as set up.
  uint8_t token_[kTokenSize] = {};
  uint64_t commId_ = 0;
  std::vector<SockAddr> laneLocal_, lanePeer_;
  // The lane blob that a lane's handshake carries (kind lane, its index, the token); lane -1: lane 0's copy (kind
  // kBlobLane0Copy).
  std::vector<uint8_t> laneBlob(int lane) const;
  bool isLaneBlob(const Hello& peer, int lane) const;
  // Lane 0's copy c (0: lane 0's own socket, 1: the other rail's): its two ends as set up, and its socket now.
  SockAddr copyLocal_[2], copyPeer_[2];
  Fd& copyFd(int c) { return c == 0 ? lane0_ : lane0Copy_; }
  // Copy c is back on `fd` (its handshake done): the mirror writes to and reads from it again. speakFirst: this end
  // accepted (its handshake reads the connector's READY last, so it may write at once).
  void readmitCopy(int c, Fd fd, int64_t downAtNs, bool speakFirst);
};

class TcpSendComm;
struct TcpSendRequest final : Request {
  Status test(bool* done, int* sizes) override;
  TcpSendComm* owner = nullptr;
  const uint8_t* data = nullptr;
  uint32_t size = 0;
  int tag = 0;
  bool matched = false;
  std::atomic<int> pending{0};  // pieces not yet in the kernel
  diagnose::OpId op = diagnose::kNoOp;
  // Failover (pieces on helper lanes): where each piece went; the send completes once every piece is delivered.
  struct Piece {
    int lane = 0;            // its helper lane; 0: on lane 0 or delivered (nothing to check)
    uint32_t offset = 0, length = 0;
    uint64_t streamEnd = 0;  // its end in the lane's stream, once written (0 before)
    bool acked = false;      // seen delivered
  };
  bool tracked = false;  // split over helper lanes with failover on
  ChunkHeader header;    // the pieces' common fields
  int npieces = 0;
  std::array<Piece, kMaxLanes> pieces{};
  bool inFlight = false;
};

class TcpSendComm final : public SendComm, public CommCore, public Tended {
 public:
  TcpSendComm(Sockets s, std::string peer, NetCommInfo info);
  ~TcpSendComm() override;
  Status regMr(void* data, size_t size, int type, void** mh) override { return CommCore::regMr(data, size, type, mh); }
  Status regMrDmaBuf(void* data, size_t size, int type, uint64_t, int, void** mh) override {
    return CommCore::regMr(data, size, type, mh);
  }
  Status deregMr(void* mh) override { return CommCore::deregMr(mh); }
  Status isend(void* data, size_t size, int tag, void* mhandle, Request** request) override;
  bool recoveryPending() const override { return (mirror_ && mirror_->liveCopies() < 2) || deadLanes_ > 0; }
  void tend() override { (void)progress(); }
  Status testRequest(TcpSendRequest* r, bool* done);

 private:
  // Failover: gives up helper lanes that failed; resends a given-up lane's pieces once the receiver closed it.
  Status checkLanes(int64_t nowNs);
  Status retireLane(int lane);
  Status resendLane(int lane);
  // Whether every piece of a tracked send is acknowledged by the peer's TCP.
  bool delivered(TcpSendRequest* r);
  // A receive-done record: the sends into that receive are placed, whatever lane their pieces went on.
  void receiveDone(uint32_t seq);
  // A piece of the send on a lane given up longer than the peer timeout ago: fails the connection (true).
  bool givenUpTooLong(TcpSendRequest* r);
  int liveHelper();  // a live helper lane with no unresolved eager message, round robin; 0 when none
  struct Cts {
    CtsHeader h;
    CtsEntry e[kMaxRecvs];
    uint32_t used = 0;  // bit per entry already matched to a send
  };
  Status progress();
  Status readCts();
  Status match();
  Status post(TcpSendRequest* r, const Cts& cts, int index);
  Status flushLane0();
  // Sends r now, before its clear-to-send record (tcp_wire.h): true when it did.
  bool sendEager(TcpSendRequest* r);
  // A helper lane with no unresolved eager message on it, round robin; -1 when there is none.
  int cleanHelper();
  // Splits r's `size` bytes over up to `n` of the lanes in `lanes` (clean helper lanes), in proportion to their
  // rails' measured rates (railRates), each piece at least tuning_.chunkBytes unless one piece takes it all, every
  // rail kept while its share is a chunk or more (splitOverRails); fills lanes[0..k) and sizes[0..k) with the
  // pieces in offset order and returns k.
  size_t splitByRate(size_t size, std::array<int, kMaxLanes>& lanes, size_t n, std::array<size_t, kMaxLanes>& sizes);
  // Per rail, the mean rate of its helper lanes that have one (0: none measured); `probed`: as the split weighs them
  // (a lane not measured lately counts faster, SendHelper::rate), else as last measured (for the log).
  std::vector<double> railRates(bool probed = true) const;
  // "eth0 -> 10.0.0.2 carried 66% of the split bytes (2 lanes, 250.1 MB/s per lane), eth1 -> ..." for the log.
  std::string railShares() const;
  // The helper lane for a large eager message: a clean one while fewer than tuning_.earlyLanes hold unresolved
  // ones, else the holding lane with the fewest.
  int earlyLane();

  FixedPool<TcpSendRequest, kMaxRequests * kMaxRecvs> pool_;
  std::array<TcpSendRequest*, kMaxRequests * kMaxRecvs> queue_{};  // unmatched, in isend order
  int queued_ = 0;
  // Records read but not yet fully matched: at most one per live receive plus one per eager message whose
  // record has not been read (its receive may have completed already).
  static constexpr uint32_t kCtsRing = 512;
  static_assert(kCtsRing >= kMaxUnsentRecords);
  std::array<Cts, kCtsRing> cts_{};
  uint32_t ctsHead_ = 0, ctsTail_ = 0;  // next to match, next to arrive
  alignas(8) uint8_t ctsIn_[4096];  // clear-to-send bytes read but not yet parsed
  size_t ctsGot_ = 0;
  bool lane0Closed_ = false;
  // A job per send, and per lane a lane-down and a lane offer.
  static constexpr size_t kLane0Jobs = kMaxRequests * kMaxRecvs + 2 * kMaxLanes;
  std::array<SendJob, kLane0Jobs> lane0Jobs_{};
  size_t lane0Head_ = 0, lane0Tail_ = 0;
  // Lane 0 on two rails: jobs [lane0Head_, lane0Handed_) are in the mirror's ring, each done once a copy's socket
  // took it up to its end.
  size_t lane0Handed_ = 0;
  std::array<uint64_t, kLane0Jobs> lane0End_{};
  Status flushMirrored();
  ReadWatch lane0Watch_;  // lane 0 waiting on the receiver to read a message it posted the receive of
  unsigned nextHelper_ = 0;
  uint32_t eagerBytes_;
  uint32_t credits_;                             // small eager messages we may still send
  uint32_t earlyCredits_ = kEarlyCredits;        // large ones
  struct Debt {
    int tag;
    int lane;    // 0, or the helper lane that holds it
    size_t job;  // lane 0: its job's place in lane0Jobs_ (marked must-read when its record arrives)
  };
  std::array<Debt, kEagerWindow> debts_{};       // eager messages whose CTS entry is not read yet, oldest first
  uint32_t ndebts_ = 0;
  uint32_t eagerSent_ = 0;                        // eager number of the next one
  std::array<int, kMaxLanes + 1> heldOn_{};       // unresolved eager messages per helper lane
  int heldTotal_ = 0;
  // Messages by path, logged at close: eager (small, before their clear-to-send, lane 0), early (large, before
  // their clear-to-send, whole on a helper lane), whole on lane 0, over the helper lanes.
  uint64_t sentEager_ = 0, sentEarly_ = 0, sentLane0_ = 0, sentSplit_ = 0;
  uint64_t waitedCredit_ = 0;  // large messages that would have left early but every credit was spent
  int holdingLanes_ = 0;    // helper lanes with unresolved eager messages
  int earlyLanesPeak_ = 0;  // the most at once
  std::vector<std::unique_ptr<SendHelper>> helpers_;  // stopped first by the destructor, then reaped
  std::vector<int> laneRail_;           // per lane (lane 0 first): its rail
  std::vector<std::string> railNames_;
  std::vector<std::shared_ptr<RailCounters>> railCounters_;  // per rail (null past the registry's bound)
  void countOnRail(int lane, uint64_t bytes);
  bool failover_ = false;
  std::chrono::milliseconds laneStall_{};  // ICN_TCP_LANE_STALL_MS
  std::unique_ptr<SendHelper> makeHelper(Fd fd, int lane);
  // The counters and the name of a lane's rail.
  RailCounters* railCountersOf(int lane) const;
  const std::string& railNameOf(int lane) const;
  // Down: lane-down sent, waiting for the receiver's close; Closed: resent, held back before its offer;
  // Offered: listening for the receiver to connect it again.
  enum class LaneState : uint8_t { Live, Down, Closed, Offered };
  Status rejoinLanes(int64_t nowNs);
  Status offerLane(int lane);
  // A lane-down or lane-offer header (tcp_wire.h) queued on lane 0 (lane 0 with index: an offer of that copy).
  void queueLaneNotice(uint16_t flags, int lane, uint32_t port, int index = 0);
  // Recovery of lane 0's copies (tcp_lane0.h), as for helper lanes: a dropped copy is offered again after its
  // hold-back and joined by the receiver. Per copy: when it was dropped (0: live), its hold-back, when it last came
  // back, the offer's listener and the handshake on it.
  Status rejoinCopies(int64_t nowNs);
  Status acceptCopy(int c);
  std::array<int64_t, 2> copyDownAtNs_{}, copyHoldBackNs_{}, copyAdmittedAtNs_{};
  std::array<std::unique_ptr<OobListener>, 2> copyListener_;
  std::array<std::unique_ptr<Handshake>, 2> copyHs_;
  uint64_t copiesBack_ = 0;  // logged at close
  int copyRail_ = 0;         // the rail of lane 0's copy 1
  Status acceptRejoin(int lane);
  // Accepts the receiver's connection to an offer of `lane` (-1: lane 0's copy) and runs its handshake: *fd once
  // it is done. A connection that names another lane or connection is refused with a WARN; the offer stands.
  void acceptOffer(OobListener& listener, std::unique_ptr<Handshake>& hs, int lane, Fd* fd);
  std::array<std::unique_ptr<OobListener>, kMaxLanes + 1> rejoinListener_;
  std::array<std::unique_ptr<Handshake>, kMaxLanes + 1> rejoinHs_;
  std::array<int64_t, kMaxLanes + 1> downAtNs_{}, closedAtNs_{}, admittedAtNs_{}, holdBackNs_{};
  uint64_t givenUp_ = 0, rejoined_ = 0;  // logged at close
  // A lane back from a failure logs its first rate samples (whether its rail moves again at its rate): how many
  // are still to log, and the helper's sample count at the last look.
  void logSampleAfterReturn(int lane, int64_t nowNs);
  std::array<uint8_t, kMaxLanes + 1> returnSamplesToLog_{};
  std::array<uint64_t, kMaxLanes + 1> bytesOfFormerHelpers_{};  // a lane's bytes before its helper was replaced
  std::array<uint32_t, kMaxLanes + 1> samplesSeen_{};
  std::array<LaneState, kMaxLanes + 1> laneState_{};
  std::array<uint64_t, kMaxLanes + 1> deliveredAtDown_{};
  // Delivery watch (proxy thread): each lane's acknowledged bytes at the last look, and when they last moved.
  std::array<uint64_t, kMaxLanes + 1> ackSeen_{};
  std::array<int64_t, kMaxLanes + 1> ackMovedNs_{};
  // When each lane's acknowledged bytes last grew, no later than it is known to have happened (the look before the
  // one that saw it), or when it was admitted; and when the delivery watch last looked.
  std::array<int64_t, kMaxLanes + 1> lastAckNs_{};
  int64_t lastWatchNs_ = 0;
  // Lanes on a path another connection found dead (tcp_paths.h): given up here too. pathGen_: the registry's
  // failures already looked at; pathRecheckNs_: when a lane on such a path, still within its quiet bound, is
  // judged again (0: none waits).
  void followPathFailures(int64_t nowNs);
  uint64_t pathGen_ = 0;
  int64_t pathRecheckNs_ = 0;
  std::array<bool, kMaxLanes + 1> pathFollowed_{};  // given up on another connection's word: not a failure of ours
  // Each lane socket's acknowledged bytes and busy time (tcpBusy), read once per look for the failover watch and
  // the wire measure (tcp_send_lanes.cc): the last look's, and whether there was one since the lane (re)started.
  struct LaneLook {
    std::array<TcpBusy, kMaxLanes + 1> now{};
    std::array<bool, kMaxLanes + 1> got{};
    std::array<bool, kMaxLanes + 1> idle{};  // not read: nothing handed to it or moved since the last read
  };
  std::array<TcpBusy, kMaxLanes + 1> lookBusy_{};
  std::array<bool, kMaxLanes + 1> looked_{};
  std::array<uint64_t, kMaxLanes + 1> writtenAtLook_{};
  std::array<bool, kMaxLanes + 1> stillAtLook_{};  // the last read found no byte acknowledged or busy time added
  int64_t nextLookNs_ = 0;
  bool wireOn_ = false;  // the straggler check runs: the diagnosis reads the wire measure
  void lookAtLanes(int64_t nowNs);
  void watchDelivery(int64_t nowNs, const LaneLook& look);
  void sampleWire(const LaneLook& look);
  int deadLanes_ = 0;
  int awaitingClose_ = 0;  // lanes given up whose lane-closed record has not come yet
  uint64_t resent_ = 0;  // pieces resent, logged at close
};

// The byte ranges of one message that its pieces have claimed, kept apart so that every byte is written exactly
// once: a receive completes when the bytes landed add up to the message, which then means every byte.
class PieceSet {
 public:
  // An honest sender splits a message into at most one piece per helper lane, or sends it whole on lane 0.
  static constexpr int kMax = kMaxPieces;
  void clear() { n_ = 0; }
  bool empty() const { return n_ == 0; }
  // Claims [offset, offset + length) of a `total`-byte message with `tag`; false with *why when the range overlaps
  // or repeats one already claimed, is empty in a non-empty message, or would be piece kMax + 1.
  bool claim(uint32_t offset, uint32_t length, uint32_t total, int tag, std::string* why);
  // Whether exactly [offset, offset + length) is claimed (a resent piece the receiver has whole).
  bool has(uint32_t offset, uint32_t length) const;
  // Gives back a claimed range (a piece its lane cut short: it comes again, resent).
  void release(uint32_t offset, uint32_t length);

 private:
  struct Range {
    uint32_t begin, end;
  };
  std::array<Range, kMax> ranges_{};  // sorted by begin
  int n_ = 0;
};

struct TcpRecvRequest final : Request {
  Status test(bool* done, int* sizes) override;
  struct Entry {
    std::atomic<int64_t> total{-1};  // message size, from its first piece (written under mu)
    std::atomic<uint64_t> received{0};
    PieceSet pieces;  // under mu
  };
  class TcpRecvComm* owner = nullptr;
  int n = 0;
  uint8_t* bufs[kMaxRecvs] = {};
  size_t posted[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  Entry entries[kMaxRecvs];
  bool eagerTaken[kMaxRecvs] = {};  // the entry belongs to an eager message (proxy thread only)
  std::atomic<uint64_t> live{0};  // seq + 1 while posted, 0 when free
  std::atomic<int> users{0};      // lanes writing into this request right now
  std::mutex mu;                  // the entries' pieces: lanes claim them concurrently
  // The diagnosis (proxy thread only): its operation, whether a first byte was seen, the bytes last reported.
  diagnose::OpId op = diagnose::kNoOp;
  bool sawByte = false;
  uint64_t bytesSeen = 0;
  std::atomic<bool> viaHelpers{false};  // a piece landed from a helper lane (failover may touch it)
};

class TcpRecvComm final : public RecvComm, public CommCore, public ChunkSink, public Tended {
 public:
  TcpRecvComm(Sockets s, std::string peer, NetCommInfo info);
  ~TcpRecvComm() override;
  Status regMr(void* data, size_t size, int type, void** mh) override { return CommCore::regMr(data, size, type, mh); }
  Status regMrDmaBuf(void* data, size_t size, int type, uint64_t, int, void** mh) override {
    return CommCore::regMr(data, size, type, mh);
  }
  Status deregMr(void* mh) override { return CommCore::deregMr(mh); }
  Status irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles, Request** request) override;
  bool recoveryPending() const override {
    return rejoins_.load(std::memory_order_relaxed) > 0 || (mirror_ && mirror_->liveCopies() < 2);
  }
  void tend() override { (void)progress(); }
  Status iflush(int, void**, const int*, void**, Request** request) override {
    *request = nullptr;  // the CPU wrote the data into host memory: nothing to flush
    return Status::Ok;
  }
  Status testRequest(TcpRecvRequest* r, bool* done, int* sizes);
  void noteArrival(TcpRecvRequest* r);
  Status land(const ChunkHeader& h, bool lane0, Landing* out, std::string* why) override;
  void landed(const Landing& l, bool arrived) override;

 private:
  // An eager message seen but not yet handed to its receive, in eager-number order.
  struct Eager {
    uint32_t number;
    int tag;
    uint32_t horizon;
    uint32_t size;
    int stage;      // its stage slot (lane 0), or -1: it waits in its helper lane's socket
    bool complete;  // staged: every byte is in the stage
    bool assigned;  // held on a helper lane: its receive is chosen (in `landing`), the lane takes it next
    Landing landing;
  };
  Status progress();
  // Whether one more record of `bytes` may be queued (compacting the queue): false once the backlog is at its
  // bound, which only a sender that does not read the records reaches.
  bool roomForRecord(size_t bytes);
  // Drops from the queue what lane 0 already sent when `bytes` more would not fit; whether they fit now.
  bool makeRoom(size_t bytes);
  // Queues a lane-closed or receive-done record (not counted against the clear-to-send backlog); false, nothing
  // queued, when it does not fit.
  bool queueNotice(const void* record, size_t bytes);
  // Writes the queued clear-to-send records that the socket takes; fails a peer that stopped reading them.
  Status sendRecords();
  Status sendRecordsMirrored();
  // Fails the connection once the records have waited ICN_PEER_TIMEOUT_MS on a peer that reads none (wrote: some
  // went out since the last look).
  Status watchRecords(bool wrote);
  // Whether clear-to-send record `seq` went out whole (only those can a sender have read).
  bool recordSent(uint32_t seq);
  void release(TcpRecvRequest* r);
  Status landEager(const ChunkHeader& h, bool lane0, Landing* out, std::string* why);
  // Checks the credit that eager message number n (unwrapped) with horizon h spends. Under eagerMu_.
  bool creditRead(uint64_t n, uint32_t horizon, std::string* why) const;
  // The receive entry an eager message with this tag and horizon belongs to, if it is posted.
  bool eagerTarget(int tag, uint32_t horizon, TcpRecvRequest** r, int* index);
  // Whether the eager message at pending_[j] may be placed now: every lower number seen, no earlier one with its
  // tag still unplaced.
  bool eagerTurn(uint32_t j) const;
  // Claims entry i of r whole for an eager message of `size` bytes (the caller checked it fits); false with *why
  // when a piece of another message claimed it first.
  bool claimEager(TcpRecvRequest* r, int i, uint32_t size, std::string* why);
  // The landing of an eager message into entry i of r: a lane writing it holds a count in r's users until landed();
  // an empty message's landing is only dropped and holds none.
  Landing landingFor(TcpRecvRequest* r, int i, uint32_t size);
  // Places every eager message whose turn has come and whose receive is posted. Under eagerMu_.
  void assignEager();
  void noteChange();  // pokes the helpers: a lane holding a message may go on

  FixedPool<TcpRecvRequest, kMaxRequests> pool_;
  uint32_t nextSeq_ = 0;
  // Clear-to-send records not yet written (proxy thread). An honest sender leaves at most kCtsBacklog: one per
  // live receive, and one per receive that its eager messages completed before the record went out; each of
  // those spent a credit not handed back in a record written yet, and it has at most kEagerWindow such credits
  // (creditRead). A backlog at the bound fails the connection.
  static constexpr uint32_t kCtsBacklog = kMaxUnsentRecords;
  std::array<uint8_t, kCtsBacklog * kMaxCtsBytes + kMaxLanes * sizeof(LaneRecord) +
                         (kMaxRequests + kCtsBacklog) * sizeof(DoneRecord)> ctsOut_{};
  size_t ctsOutLen_ = 0, ctsOutOff_ = 0;
  std::array<uint64_t, kCtsBacklog> ctsEnd_{};  // where each unsent record ends, in bytes ever queued
  uint64_t ctsQueuedBytes_ = 0, ctsSentBytes_ = 0;
  uint32_t ctsQueued_ = 0;  // records queued
  // Records written whole. A sender may answer a record before our send() returns, so it advances under eagerMu_
  // and a lane re-checks under eagerMu_ before refusing a piece or an eager message for an unsent record.
  std::atomic<uint32_t> ctsSent_{0};
  ReadWatch ctsWatch_;  // the records waiting on the sender to read them
  ChunkReader reader0_{kLane0Stage, true};
  bool lane0Closed_ = false;
  // Eager messages: the proxy thread reads lane 0 and posts receives, helper lanes read the larger ones; their
  // shared state (below, nextSeq_ and the requests' eagerTaken) is guarded by eagerMu_.
  mutable std::mutex eagerMu_;
  uint32_t eagerBytes_;
  // Stage slots for small eager messages that arrive before their receive, each allocated on first use (most
  // connections never stage one, and a busy one reuses the lowest free slots).
  std::array<std::unique_ptr<uint8_t[]>, kEagerCredits> stages_;
  uint8_t* stage(int slot) const { return stages_[static_cast<size_t>(slot)].get(); }
  std::array<Eager, kEagerWindow> pending_{};
  uint32_t npending_ = 0;
  uint64_t eagerBase_ = 0;   // lowest eager number not seen yet (unwrapped: the wire carries its low 32 bits)
  std::bitset<kEagerWindow> seen_;  // bit k: number eagerBase_ + k was seen
  uint64_t freeStages_ = ~uint64_t{0} >> (64 - kEagerCredits);  // the low kEagerCredits bits
  uint32_t creditsOwed_ = 0, earlyOwed_ = 0;  // eager messages consumed since the last CTS, by kind
  // Credits handed back, both kinds counted together in record order: credit c went out in record
  // creditRecord_[c % kCreditRing]. Eager number n spends credit n - initialCredits_; the ones a sender can still
  // spend lie within 2 x kEagerWindow of the newest (creditRead).
  static constexpr uint32_t kCreditRing = 2 * kEagerWindow;
  std::array<uint32_t, kCreditRing> creditRecord_{};
  uint64_t creditsReturned_ = 0;
  uint32_t initialCredits_;  // what the sender starts with, both kinds
  std::atomic<int> closedLanes_{0};
  uint64_t received_ = 0;  // messages completed, logged at close
  // Failover: lanes the sender gave up (lane-down on lane 0, proxy thread), and whether their closed record is out.
  std::array<bool, kMaxLanes + 1> laneDown_{}, closedSent_{};
  std::atomic<bool> anyLaneDown_{false};  // resent pieces are accepted from then on
  bool multiRail_ = false;  // lanes on two or more rails: lane-downs, resends and offers are accepted
  bool failover_ = false;   // ... and a lane that breaks is left to the sender to give up (ICN_TCP_FAILOVER)
  std::atomic<uint64_t> discarded_{0};  // resent pieces dropped (the receiver had them), logged at close
  Status handleLaneDown(const ChunkHeader& h, bool lane0, Landing* out, std::string* why);
  Status handleLaneOffer(const ChunkHeader& h, bool lane0, Landing* out, std::string* why);
  Status handleCopyOffer(const ChunkHeader& h, bool lane0, Landing* out, std::string* why);
  // Recovery (proxy thread): connects offered lanes again, with backoff.
  void rejoinLanes(int64_t nowNs);
  void finishRejoin(int lane, Fd fd);
  // rejoin_[0]: lane 0's copy `copy` (tcp_lane0.h).
  struct Rejoin {
    uint16_t port = 0;  // 0: no offer
    int copy = 0;
    int64_t offeredNs = 0;
    std::unique_ptr<OobConnector> connector;
    bool confirmed = false;
    int64_t attemptNs = 0, nextNs = 0, backoffNs = 0;
  };
  std::array<Rejoin, kMaxLanes + 1> rejoin_;
  std::atomic<int> rejoins_{0};  // offers being worked on
  void queueLaneClosed(int lane);
  Status queueDone(uint32_t seq);  // a receive-done record (tcp_wire.h)
  // Whether receive `seq` was posted recently enough that a resent piece for it may still be on its way.
  bool seqRecent(uint32_t seq) const;
  std::vector<std::unique_ptr<RecvHelper>> helpers_;
};

}  // namespace icn::tcp
