// A ring all-reduce played in simulated time through real LinkMonitors: each rank's receive and send connection
// per channel sees the hook calls a transport would make (receives posted NCCL_STEPS ahead, sends posted when their
// data is processed, clear-to-send when the receiver posted, bytes paced by the link). Healthy runs carry the noise
// of real ones: per-step processing spread, ranks reaching each collective at different times, links of unequal
// speed, per-message rate jitter and rare multi-millisecond hiccups of one rank. One rank, one delay or one link
// can be made slow.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "diagnose/link_monitor.h"
#include "diagnose/summary.h"

namespace icn::diagnose::sim {

struct RingConfig {
  int ranks = 8;
  int channels = 2;
  int slots = 8;                 // receives posted ahead per connection (NCCL_STEPS)
  int loops = 4;                 // slices of 2(ranks-1) steps per collective
  double chunkBytes = 512 << 10; // per step and channel
  double bwBps = 2.5e9;          // per connection
  double latencyS = 20e-6;
  double stepS = 150e-6;         // a rank's processing of one received step
  double gapS = 2e-3;            // compute between two collectives
  int collectivesPerPeriod = 12;
  // noise
  double stepSpread = 0.3;       // lognormal sigma of the processing time
  double arrivalJitterS = 150e-6;
  double hiccupProb = 0.004;     // per rank and collective
  double hiccupMaxS = 15e-3;
  double rateJitter = 0.15;      // uniform +- per message
  double linkSpread = 0.1;       // uniform +- per link, fixed
  // injected faults
  int slowRank = -1;
  double slowFactor = 1.5;       // slowRank's processing inside collectives takes this many times as long
  double slowGapFactor = 1.5;    // and its compute between collectives
  int delayedRank = -1;
  double delayS = 3e-3;          // added to delayedRank's arrival at every collective
  int slowLinkFrom = -1;         // link slowLinkFrom -> slowLinkFrom+1 runs at slowLinkFactor of its speed
  double slowLinkFactor = 0.4;
  uint32_t seed = 1;
};

class RingSim {
 public:
  explicit RingSim(RingConfig cfg);
  // Plays one period (collectivesPerPeriod collectives); returns every rank's summaries over it.
  std::vector<PeerSummary> period();
  RingConfig& config() { return cfg_; }

 private:
  struct Event {
    uint64_t t;
    int order;  // post 0, ready 1, done 2: equal times replay in that order
    int link, step;
    uint64_t bytes;
  };
  void collective();
  double proc(int r);
  uint64_t ns(double s) const { return static_cast<uint64_t>(s * 1e9); }

  RingConfig cfg_;
  std::mt19937_64 rng_;
  std::vector<std::shared_ptr<LinkMonitor>> links_;  // [channel][rank][send, recv]
  std::vector<double> linkBw_;                       // [rank]: rank -> rank+1
  std::vector<double> ready_;                        // each rank's arrival at its next collective
  std::vector<Event> events_;  // reused from one collective to the next
  std::vector<double> grid_;
  std::vector<OpId> ops_;
  double now_ = 1.0;
  int tag_ = 0;
};

}  // namespace icn::diagnose::sim
