#include "ring_sim.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace icn::diagnose::sim {

RingSim::RingSim(RingConfig cfg) : cfg_(cfg), rng_(cfg.seed) {
  std::uniform_real_distribution<double> spread(1 - cfg_.linkSpread, 1 + cfg_.linkSpread);
  for (int r = 0; r < cfg_.ranks; r++) linkBw_.push_back(cfg_.bwBps * spread(rng_));
  for (int c = 0; c < cfg_.channels; c++)
    for (int r = 0; r < cfg_.ranks; r++)
      for (Dir d : {Dir::Send, Dir::Recv}) {
        const int peer = d == Dir::Send ? (r + 1) % cfg_.ranks : (r + cfg_.ranks - 1) % cfg_.ranks;
        LinkInfo i{0xc0ffee, r, peer, "host" + std::to_string(r), "10.0.0." + std::to_string(r + 1),
                   "host" + std::to_string(peer), "10.0.0." + std::to_string(peer + 1), d};
        links_.push_back(std::make_shared<LinkMonitor>(i));
      }
  ready_.assign(cfg_.ranks, now_);
}

double RingSim::proc(int r) {
  std::lognormal_distribution<double> spread(0, cfg_.stepSpread);
  return cfg_.stepS * spread(rng_) * (r == cfg_.slowRank ? cfg_.slowFactor : 1.0);
}

void RingSim::collective() {
  const int n = cfg_.ranks, slice = 2 * (n - 1), steps = slice * cfg_.loops, slots = cfg_.slots;
  std::uniform_real_distribution<double> unit(0, 1);
  std::exponential_distribution<double> jitter(1 / cfg_.arrivalJitterS);
  std::vector<double> arrive(n);
  std::vector<int> hiccupStep(n, -1);
  std::vector<double> hiccup(n, 0);
  for (int r = 0; r < n; r++) {
    arrive[r] = ready_[r] + jitter(rng_) + (r == cfg_.delayedRank ? cfg_.delayS : 0);
    if (unit(rng_) < cfg_.hiccupProb) {  // the rank stalls once: at its arrival or inside the collective
      hiccup[r] = 1e-3 + unit(rng_) * (cfg_.hiccupMaxS - 1e-3);
      hiccupStep[r] = static_cast<int>(unit(rng_) * (steps + 1)) - 1;
      if (hiccupStep[r] < 0) arrive[r] += hiccup[r];
    }
  }
  std::vector<Event>& events = events_;
  events.clear();
  std::vector<double> end(n, 0);
  const uint64_t bytes = static_cast<uint64_t>(cfg_.chunkBytes);
  std::uniform_real_distribution<double> rate(1 - cfg_.rateJitter, 1 + cfg_.rateJitter);
  for (int c = 0; c < cfg_.channels; c++) {
    grid_.resize(static_cast<size_t>(5 * n * steps));  // five [rank][step] tables
    struct Table {
      double* base;
      int steps;
      double* operator[](int r) const { return base + static_cast<size_t>(r * steps); }
    };
    auto table = [&](int k) { return Table{grid_.data() + static_cast<size_t>(k * n * steps), steps}; };
    const Table recvPost = table(0), recvDone = table(1), consume = table(2), sendPost = table(3), xferEnd = table(4);
    for (int s = 0; s < steps; s++) {
      for (int r = 0; r < n; r++) {
        recvPost[r][s] = s < slots ? arrive[r] : consume[r][s - slots];
        // A slice's first step sends the rank's own data; each later one what it received the step before.
        const double data = s % slice == 0 ? arrive[r] + (s == 0 ? proc(r) : 0) : consume[r][s - 1];
        sendPost[r][s] = s == 0 ? data : std::max(data, sendPost[r][s - 1]);
      }
      for (int r = 0; r < n; r++) {
        const int q = (r + 1) % n;
        const double cts = recvPost[q][s] + cfg_.latencyS;
        const double start = std::max({sendPost[r][s], cts, s ? xferEnd[r][s - 1] : 0.0});
        const double bw = linkBw_[r] * rate(rng_) * (r == cfg_.slowLinkFrom ? cfg_.slowLinkFactor : 1.0);
        xferEnd[r][s] = start + static_cast<double>(bytes) / bw;
        recvDone[q][s] = xferEnd[r][s] + cfg_.latencyS;
        const int send = (c * n + r) * 2, recv = (c * n + q) * 2 + 1;
        events.push_back({ns(sendPost[r][s]), 0, send, s, bytes});
        events.push_back({ns(std::max(cts, sendPost[r][s])), 1, send, s, 0});
        events.push_back({ns(xferEnd[r][s]), 2, send, s, bytes});
        events.push_back({ns(recvPost[q][s]), 0, recv, s, bytes});
        events.push_back({ns(start + cfg_.latencyS), 1, recv, s, 0});
        events.push_back({ns(recvDone[q][s]), 2, recv, s, bytes});
      }
      for (int r = 0; r < n; r++)
        consume[r][s] = recvDone[r][s] + proc(r) + (hiccupStep[r] == s ? hiccup[r] : 0);
    }
    for (int r = 0; r < n; r++) end[r] = std::max({end[r], consume[r][steps - 1], xferEnd[r][steps - 1]});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.t != b.t ? a.t < b.t : a.order < b.order; });
  ops_.assign(links_.size() * static_cast<size_t>(steps), kNoOp);
  for (const Event& e : events) {
    LinkMonitor& m = *links_[static_cast<size_t>(e.link)];
    OpId& op = ops_[static_cast<size_t>(e.link * steps + e.step)];
    if (e.order == 0) op = m.posted(tag_ + e.step, e.bytes, e.t);
    else if (e.order == 1) m.ready(op, e.t);
    else m.done(op, e.bytes, e.t);
  }
  tag_ += steps;
  for (int r = 0; r < n; r++) ready_[r] = end[r] + cfg_.gapS * (r == cfg_.slowRank ? cfg_.slowGapFactor : 1.0);
  now_ = *std::max_element(ready_.begin(), ready_.end());
}

std::vector<PeerSummary> RingSim::period() {
  for (int i = 0; i < cfg_.collectivesPerPeriod; i++) collective();
  return summarize(links_);
}

}  // namespace icn::diagnose::sim
