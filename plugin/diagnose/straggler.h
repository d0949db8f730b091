// Straggler detection from the per-peer summaries of every process of a communicator (see summary.h).
//
// A rank is late when the ranks that exchange with it wait for it and it does not wait for them. Waits are read
// two ways: how late the peer came to each exchange (the arrival median: a rank that enters collectives late) and
// how long each message waited at the head of the queue (the wait median: a rank that cannot keep pace). In one
// direction (peers' receives from it, or peers' sends to it waiting for its clear-to-send) and by one of the two:
//   - the connections that wait on it reach lateFloorS, on at least lateShare of them;
//   - its own connections' upper tail (p90) by that measure stays under 1/ownRatio of their median;
//   - per message, its own connections wait no more than the communicator's median connection.
// A late rank makes everyone downstream wait too (a ring passes the delay on), and a rank that waited comes late
// to the next exchange; the late rank is the one that does not wait itself. A rank whose process was stopped or
// starved of CPU (its stall share, summary.h) is the exception: its waits are timed when it runs again. Of several candidates, only those
// late by at least half the latest one's delay are named.
//
// A link is slow when its rate is at most slowLinkRatio of the median rate of comparable connections of the same
// communicator (same direction, both ends on one host or not, message size rounded to the same power of two), among
// at least minGroupLinks; one timed by its messages must also take at least minTimedGapS longer per message than
// at the group's median rate (message timings include both hosts' polling, which lags by tens of microseconds
// where several ranks' threads share a host's cores: on a link fast enough for that to be most of a message's time,
// connections that carry different traffic, a ring's pipelined chunks beside an alltoall's, time apart by several
// times without a slow link). The lateness a slow link causes is the link's, not its sender's: connections over a slow link do
// not count against their sending rank.
//
// Findings are raised after enterPeriods consecutive periods (a slow link timed by its messages, not on the wire,
// after enterPeriodsTimed: message timings include both hosts' threads, whose dips on a busy host last a period or
// two) and cleared after exitPeriods periods without them;
// a raised finding holds while it passes its thresholds relaxed by exitRelax, so a figure hovering at a threshold
// neither flaps nor repeats its report.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "diagnose/summary.h"

namespace icn::diagnose {

struct DetectorConfig {
  double lateFloorS = 0.0005;
  double ownRatio = 6;
  // Where a late rank's delay spreads to every rank (collectives posted together, a ring that waits on its
  // slowest member), its peers wait about as long on each other as on it: then it is the one rank that waits
  // this many times less than the others' median does, while its peers wait on it past the floor.
  double standOutRatio = 3;
  double lateShare = 0.5;
  uint32_t minCount = 8;      // wait samples a connection needs in the window to count
  uint32_t minArrivals = 4;   // arrival samples for the arrival median to count
  // A rank whose own process was not running for this share of a period (and standOutRatio times the other
  // ranks' median) is late whatever its own waits say: its threads time them after it runs again. The tick
  // that measures it counts only how late it woke beyond its slack, a part of the time a stopped process misses,
  // while a process that runs reads 0.
  double minStallShare = 0.05;
  double slowLinkRatio = 0.6;
  double minTimedGapS = 80e-6;
  uint32_t minGroupLinks = 3;
  int enterPeriods = 2;
  int enterPeriodsTimed = 3;
  int exitPeriods = 3;
  double exitRelax = 0.75;
};

enum class FindingKind { LateRank, SlowLink };

struct Finding {
  FindingKind kind = FindingKind::LateRank;
  uint64_t commId = 0;
  int rank = -1;       // the late rank; for a slow link its sending end
  int peerRank = -1;   // a slow link's receiving end
  std::string host, addr, peerHost, peerAddr;
  // LateRank
  Dir via = Dir::Recv;       // Recv: peers' receives from it wait; Send: peers' sends to it wait
  double lateMedianS = 0;    // median wait of the late connections that wait on it
  uint32_t lateLinks = 0, observedLinks = 0;
  double imposedMeanS = 0;   // per message, what the connections that wait on it wait (their median)
  double ownMeanS = 0;       // per message, what its own connections in that direction wait (their median)
  double stallShare = 0;     // named because its process was not running this share of the period (else 0)
  // SlowLink
  double rateBps = 0, groupMedianBps = 0, historyRatio = 0;
  bool wire = false;         // the rates are the wire measure (link_monitor.h)
  int periods = 0;           // consecutive periods seen
};

// A finding's identity across periods.
using FindingKey = std::tuple<int, uint64_t, int, int>;
FindingKey keyOf(const Finding& f);

// One period's findings without hysteresis; `active` relaxes the thresholds for findings already raised.
std::vector<Finding> detect(const std::vector<PeerSummary>& all, const DetectorConfig& cfg,
                            const std::map<FindingKey, Finding>& active);

class StragglerDetector {
 public:
  explicit StragglerDetector(DetectorConfig cfg = {}) : cfg_(cfg) {}
  struct Update {
    std::vector<Finding> raised;   // reported for the first time this period
    std::vector<Finding> cleared;  // gone for exitPeriods periods
    std::vector<Finding> active;   // raised and not cleared (the raised ones included)
  };
  Update evaluate(const std::vector<PeerSummary>& all);
  const DetectorConfig& config() const { return cfg_; }

 private:
  struct Track {
    Finding last;
    int hits = 0, misses = 0;
    bool raised = false;
  };
  DetectorConfig cfg_;
  std::map<FindingKey, Track> tracks_;
};

// "rank 3 on host3 (10.88.0.4) is late by a median 4.1 ms on 6 of 6 connections; ..." (the INFO line's text).
// `all` lets a late rank's line name its slow links.
std::string describe(const Finding& f, const std::vector<Finding>& all);
std::string describeCleared(const Finding& f);

}  // namespace icn::diagnose
