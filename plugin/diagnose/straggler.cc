#include "diagnose/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>
#include <utility>

namespace icn::diagnose {
namespace {

// Thresholds of one finding: relaxed while the finding is raised.
struct Limits {
  double floorS, ownRatio, share, slowRatio, standOutRatio, stallShare, timedGapS;
};

Limits limitsFor(const DetectorConfig& c, bool raised) {
  if (!raised)
    return {c.lateFloorS, c.ownRatio, c.lateShare, c.slowLinkRatio, c.standOutRatio, c.minStallShare, c.minTimedGapS};
  return {c.lateFloorS * c.exitRelax, c.ownRatio * c.exitRelax, c.lateShare * c.exitRelax,
          std::min(1.0, c.slowLinkRatio / c.exitRelax), std::max(1.0, c.standOutRatio * c.exitRelax),
          c.minStallShare * c.exitRelax, c.minTimedGapS * c.exitRelax};
}

double median(std::vector<double> v) { return quantile(v, 0.5); }

bool usable(const PeerSummary& s, const DetectorConfig& c) {
  return s.rank >= 0 && s.peerRank >= 0 && s.rank != s.peerRank && s.fig.count >= c.minCount;
}

bool sameHost(const PeerSummary& s) { return !s.host.empty() && s.host == s.peerHost; }

// The data's direction over the connection a summary describes.
std::pair<int, int> dataPath(const PeerSummary& s) {
  return s.dir == Dir::Send ? std::pair{s.rank, s.peerRank} : std::pair{s.peerRank, s.rank};
}

bool isRaised(const std::map<FindingKey, Finding>& active, const Finding& f) { return active.count(keyOf(f)) != 0; }

// One communicator's summaries, indexed once: by their own rank and by the rank they wait on, per direction.
struct Comm {
  uint64_t id = 0;
  std::vector<const PeerSummary*> all;
  std::map<int, std::vector<const PeerSummary*>> byRank[2], byPeer[2];
  double medianMean[2] = {0, 0};  // per direction, the median connection's wait per message
  std::set<int> ranks;
  std::map<int, double> stall;    // per rank, the share of the period its process was not running

  explicit Comm(std::vector<const PeerSummary*> v) : all(std::move(v)) {
    id = all.front()->commId;
    std::vector<double> means[2];
    for (const PeerSummary* s : all) {
      const int d = static_cast<int>(s->dir);
      byRank[d][s->rank].push_back(s);
      byPeer[d][s->peerRank].push_back(s);
      means[d].push_back(s->fig.waitMeanS);
      ranks.insert({s->rank, s->peerRank});
      stall[s->rank] = std::max(stall[s->rank], s->fig.stallShare);
    }
    for (int d = 0; d < 2; d++) medianMean[d] = median(means[d]);
  }
  const std::vector<const PeerSummary*>& of(const std::map<int, std::vector<const PeerSummary*>>& m, int r) const {
    static const std::vector<const PeerSummary*> none;
    auto it = m.find(r);
    return it == m.end() ? none : it->second;
  }
};

// Rank x's process was not running for at least the limit's share of the period, and for standOutRatio times
// the other ranks' median: stopped or starved of CPU, it is late to everything while its threads do not run, and
// its own waits, timed when it runs again, look like everyone's.
bool stalledOut(int x, const Comm& comm, const Limits& lim) {
  auto mine = comm.stall.find(x);
  if (mine == comm.stall.end() || mine->second < lim.stallShare) return false;
  std::vector<double> others;
  for (const auto& [y, share] : comm.stall)
    if (y != x) others.push_back(share);
  return others.size() >= 2 && mine->second >= lim.standOutRatio * median(others);
}

// How much longer a link's messages take, each, than at the group's median rate.
double timedGapS(const PeerSummary& s, double groupMedianBps) {
  return s.fig.rateBytes * (1.0 / s.fig.rateBps - 1.0 / groupMedianBps);
}

// Links are compared within a group of their kind: direction, both ends on one host or not, and message size
// rounded to a power of two (a link carrying small messages times lower without being slow). Wire measures
// (summary.h) are compared only with each other, and where a link has one (from either end) its message timings
// are not read: those stretch whenever a busy host's threads poll late, which the wire measure does not see. A link
// without one is judged by its messages, also where other links of the communicator have one (a period's wire
// measure covers only the connections that split messages over helper lanes).
std::vector<Finding> slowLinks(const Comm& comm, const DetectorConfig& c, const std::map<FindingKey, Finding>& active) {
  using Group = std::tuple<bool, int, bool, long>;
  auto groupOf = [](const PeerSummary& s) {
    const long size = s.fig.rateWire ? 0 : std::lround(std::log2(std::max(1.0, s.fig.rateBytes)));
    return Group{s.fig.rateWire, static_cast<int>(s.dir), sameHost(s), size};
  };
  std::set<std::pair<int, int>> wired;  // data paths with a wire measure
  for (const PeerSummary* s : comm.all)
    if (s->fig.rateWire && s->fig.rateBps > 0) wired.insert(dataPath(*s));
  auto compared = [&](const PeerSummary& s) {
    return s.fig.rateBps > 0 && (s.fig.rateWire || wired.count(dataPath(s)) == 0);
  };
  std::map<Group, std::vector<double>> rates;
  for (const PeerSummary* s : comm.all)
    if (compared(*s)) rates[groupOf(*s)].push_back(s->fig.rateBps);
  std::map<Group, double> medians;
  for (auto& [g, v] : rates)
    if (v.size() >= c.minGroupLinks) medians[g] = median(v);
  std::map<std::pair<int, int>, Finding> found;
  const Limits notRaised = limitsFor(c, false);
  for (const PeerSummary* s : comm.all) {
    if (!compared(*s)) continue;
    auto m = medians.find(groupOf(*s));
    if (m == medians.end()) continue;
    const auto [src, dst] = dataPath(*s);
    // A process that did not run is slow on all its links: the rank is named, not its links (and the connections
    // from and to it stay evidence of its lateness).
    if (stalledOut(src, comm, notRaised) || stalledOut(dst, comm, notRaised)) continue;
    Finding f;
    f.kind = FindingKind::SlowLink;
    f.commId = s->commId;
    f.rank = src;
    f.peerRank = dst;
    const bool mine = s->dir == Dir::Send;  // the summary's own end is the sender
    f.host = mine ? s->host : s->peerHost;
    f.addr = mine ? s->addr : s->peerAddr;
    f.peerHost = mine ? s->peerHost : s->host;
    f.peerAddr = mine ? s->peerAddr : s->addr;
    f.rateBps = s->fig.rateBps;
    f.groupMedianBps = m->second;
    f.historyRatio = s->fig.rateRatio;
    const Limits lim = limitsFor(c, isRaised(active, f));
    if (s->fig.rateBps > lim.slowRatio * m->second) continue;
    if (!s->fig.rateWire && timedGapS(*s, m->second) < lim.timedGapS) continue;
    // Both ends may see it; the wire measure wins, then the receiver's figure (it timed the bytes arriving).
    auto prior = found.find({src, dst});
    const bool better = prior == found.end() || (s->fig.rateWire && !prior->second.wire) ||
                        (s->fig.rateWire == prior->second.wire && s->dir == Dir::Recv);
    f.wire = s->fig.rateWire;
    if (better) found[{src, dst}] = f;
  }
  std::vector<Finding> out;
  for (auto& [k, f] : found) out.push_back(std::move(f));
  return out;
}

// The two measures a connection's wait on its peer is read from: how late the peer came to each exchange
// (arrivals), and how long each message waited at the head of the queue (pacing).
enum class Measure { Arrival, Pacing };

double lateBy(const PeerSummary& s, Measure m, const DetectorConfig& c) {
  if (m == Measure::Pacing) return s.fig.waitMedianS;
  return s.fig.arrivals >= c.minArrivals ? s.fig.arrivalMedianS : 0;
}

// How much the rank itself waits, by the same measure: its upper tail, since a late rank never waits.
double ownTail(const PeerSummary& s, Measure m, const DetectorConfig& c) {
  if (m == Measure::Pacing) return s.fig.waitP90S;
  return s.fig.arrivals >= c.minArrivals ? s.fig.arrivalP90S : -1;
}

// How long each rank's own connections wait, per direction and measure: their median. Read once per check (every
// rank's is compared with every other's).
class OwnLevels {
 public:
  OwnLevels(const Comm& comm, const DetectorConfig& c) {
    for (Dir d : {Dir::Recv, Dir::Send})
      for (Measure m : {Measure::Arrival, Measure::Pacing})
        for (const auto& [x, own] : comm.byRank[static_cast<int>(d)]) {
          std::vector<double> v;
          for (const PeerSummary* s : own)
            if (m == Measure::Pacing || s->fig.arrivals >= c.minArrivals) v.push_back(lateBy(*s, m, c));
          if (!v.empty()) slot(d, m)[x] = median(v);
        }
  }
  const std::map<int, double>& of(Dir d, Measure m) const { return levels_[static_cast<int>(d)][static_cast<int>(m)]; }

 private:
  std::map<int, double>& slot(Dir d, Measure m) { return levels_[static_cast<int>(d)][static_cast<int>(m)]; }
  std::map<int, double> levels_[2][2];
};

// Rank x waits `standOutRatio` times less than the other ranks' median does, and they wait past the floor: the
// delay it brings has spread to everyone but itself.
bool standsOut(int x, Dir d, Measure m, const OwnLevels& levels, const Limits& lim) {
  const std::map<int, double>& all = levels.of(d, m);
  auto mine = all.find(x);
  if (mine == all.end()) return false;
  std::vector<double> others;
  for (const auto& [y, l] : all)
    if (y != x) others.push_back(l);
  if (others.size() < 2) return false;
  const double level = median(others);
  return level >= lim.floorS && mine->second * lim.standOutRatio <= level;
}

// The late-rank test for rank x in one direction and by one measure; false when it does not hold.
bool lateIn(int x, Dir d, Measure m, const Comm& comm, const OwnLevels& levels,
            const std::set<std::pair<int, int>>& slow, const DetectorConfig& c, const Limits& lim, Finding* f) {
  const int di = static_cast<int>(d);
  std::vector<double> late, imposed, ownTails, ownMeans;
  const std::vector<const PeerSummary*>& own = comm.of(comm.byRank[di], x);
  for (const PeerSummary* s : own) {
    const double t = ownTail(*s, m, c);
    if (t >= 0) ownTails.push_back(t);
    ownMeans.push_back(s->fig.waitMeanS);
  }
  size_t observed = 0;
  const PeerSummary* anyObserver = nullptr;
  for (const PeerSummary* s : comm.of(comm.byPeer[di], x)) {
    if (slow.count(dataPath(*s))) continue;
    const double v = lateBy(*s, m, c);
    observed++;
    imposed.push_back(s->fig.waitMeanS);
    if (v >= lim.floorS) late.push_back(v);
    anyObserver = s;
  }
  if (late.empty() || ownTails.empty()) return false;
  const size_t needed = std::max<size_t>(1, static_cast<size_t>(std::ceil(lim.share * observed - 1e-9)));
  if (late.size() < needed) return false;
  const double lateMedian = median(late);
  // It does not wait by the measure it is late by (or far less than every other rank, where its delay spread to
  // all), nor more than the communicator's connections do overall (a rank that comes late because it waited
  // before is not the one to name); unless its own process did not run (its waits then mean nothing).
  const bool stalled = stalledOut(x, comm, lim);
  if (!stalled && median(ownTails) * lim.ownRatio > lateMedian && !standsOut(x, d, m, levels, lim)) return false;
  if (!stalled && median(ownMeans) > comm.medianMean[di]) return false;
  f->stallShare = stalled ? comm.stall.at(x) : 0;
  f->kind = FindingKind::LateRank;
  f->commId = comm.id;
  f->rank = x;
  f->via = d;
  f->lateMedianS = lateMedian;
  f->lateLinks = static_cast<uint32_t>(late.size());
  f->observedLinks = static_cast<uint32_t>(observed);
  f->imposedMeanS = median(imposed);
  f->ownMeanS = median(ownMeans);
  f->host = anyObserver->peerHost;  // as its peers name it, unless it names itself
  f->addr = anyObserver->peerAddr;
  if (!own.front()->host.empty()) {
    f->host = own.front()->host;
    if (!own.front()->addr.empty()) f->addr = own.front()->addr;
  }
  return true;
}

std::vector<Finding> lateRanks(const Comm& comm, const std::vector<Finding>& slowFound, const DetectorConfig& c,
                               const std::map<FindingKey, Finding>& active) {
  std::vector<Finding> out;
  if (comm.ranks.size() < 3) return out;  // two ranks wait on each other by turns: no third to tell who is late
  std::set<std::pair<int, int>> slow;
  for (const Finding& f : slowFound) slow.insert({f.rank, f.peerRank});
  const OwnLevels levels(comm, c);
  for (int x : comm.ranks) {
    Finding probe;
    probe.kind = FindingKind::LateRank;
    probe.commId = comm.id;
    probe.rank = x;
    const Limits lim = limitsFor(c, isRaised(active, probe));
    Finding best, f;
    bool any = false;
    for (Dir d : {Dir::Recv, Dir::Send})
      for (Measure m : {Measure::Arrival, Measure::Pacing})
        if (lateIn(x, d, m, comm, levels, slow, c, lim, &f) && (!any || f.lateMedianS > best.lateMedianS)) {
          best = f;
          any = true;
        }
    if (any) out.push_back(best);
  }
  // A rank that waited on the latest one comes late to what follows; the latest explains it. Only ranks late
  // by at least half the latest one's delay are named.
  double latest = 0;
  for (const Finding& f : out) latest = std::max(latest, f.lateMedianS);
  out.erase(std::remove_if(out.begin(), out.end(), [&](const Finding& f) { return f.lateMedianS < latest / 2; }),
            out.end());
  return out;
}

std::string duration(double s) {
  char b[32];
  if (s >= 1) snprintf(b, sizeof b, "%.1f s", s);
  else if (s >= 0.001) snprintf(b, sizeof b, "%.1f ms", s * 1e3);
  else snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  return b;
}

std::string where(const std::string& host, const std::string& addr) {
  if (host.empty() && addr.empty()) return "";
  if (addr.empty()) return " on " + host;
  if (host.empty()) return " at " + addr;
  return " on " + host + " (" + addr + ")";
}

std::string percent(double r) { return std::to_string(static_cast<int>(std::lround(r * 100))) + "%"; }

std::string rate(double bps) {
  char b[32];
  snprintf(b, sizeof b, bps >= 1e9 ? "%.2f GB/s" : "%.0f MB/s", bps >= 1e9 ? bps / 1e9 : bps / 1e6);
  return b;
}

}  // namespace

FindingKey keyOf(const Finding& f) {
  return {static_cast<int>(f.kind), f.commId, f.rank, f.kind == FindingKind::SlowLink ? f.peerRank : -1};
}

std::vector<Finding> detect(const std::vector<PeerSummary>& all, const DetectorConfig& c,
                            const std::map<FindingKey, Finding>& active) {
  std::map<uint64_t, std::vector<const PeerSummary*>> comms;
  for (const PeerSummary& s : all)
    if (usable(s, c)) comms[s.commId].push_back(&s);
  std::vector<Finding> out;
  for (auto& [id, summaries] : comms) {
    const Comm comm(std::move(summaries));
    std::vector<Finding> slow = slowLinks(comm, c, active);
    std::vector<Finding> late = lateRanks(comm, slow, c, active);
    out.insert(out.end(), late.begin(), late.end());
    out.insert(out.end(), slow.begin(), slow.end());
  }
  return out;
}

StragglerDetector::Update StragglerDetector::evaluate(const std::vector<PeerSummary>& all) {
  std::map<FindingKey, Finding> raised;
  for (const auto& [k, t] : tracks_)
    if (t.raised) raised[k] = t.last;
  Update u;
  std::set<FindingKey> seen;
  for (Finding& f : detect(all, cfg_, raised)) {
    const FindingKey k = keyOf(f);
    Track& t = tracks_[k];
    t.hits++;
    t.misses = 0;
    f.periods = t.hits;
    t.last = f;
    seen.insert(k);
    const bool timed = f.kind == FindingKind::SlowLink && !f.wire;
    if (!t.raised && t.hits >= (timed ? cfg_.enterPeriodsTimed : cfg_.enterPeriods)) {
      t.raised = true;
      u.raised.push_back(f);
    }
  }
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    Track& t = it->second;
    if (!seen.count(it->first)) {
      t.hits = 0;
      if (!t.raised || ++t.misses >= cfg_.exitPeriods) {
        if (t.raised) u.cleared.push_back(t.last);
        it = tracks_.erase(it);
        continue;
      }
    }
    if (t.raised) u.active.push_back(t.last);
    ++it;
  }
  return u;
}

std::string describe(const Finding& f, const std::vector<Finding>& all) {
  std::string s = "comm " + commIdText(f.commId) + ": ";
  if (f.kind == FindingKind::SlowLink) {
    s += "link rank " + std::to_string(f.rank) + where(f.host, f.addr) + " -> rank " + std::to_string(f.peerRank) +
         where(f.peerHost, f.peerAddr) + " runs at " + percent(f.rateBps / f.groupMedianBps) + " of the others (" +
         rate(f.rateBps) + " against a median " + rate(f.groupMedianBps) +
         (f.wire ? ", acknowledged on the wire" : ", timed by its messages");
    if (f.historyRatio > 0) s += "; " + percent(f.historyRatio) + " of its own longer-term rate";
    return s + ")";
  }
  s += "rank " + std::to_string(f.rank) + where(f.host, f.addr) + " is late by a median " + duration(f.lateMedianS) +
       " on " + std::to_string(f.lateLinks) + " of " + std::to_string(f.observedLinks) + " connections " +
       (f.via == Dir::Recv ? "receiving from it (its own receives wait " : "sending to it (its own sends wait ") +
       duration(f.ownMeanS) + " per message, theirs on it " + duration(f.imposedMeanS) + ")";
  if (f.stallShare > 0)
    s += "; its process was not running for " + percent(f.stallShare) + " of the period (stopped or starved of CPU)";
  for (const Finding& l : all)
    if (l.kind == FindingKind::SlowLink && l.commId == f.commId && l.rank == f.rank)
      s += "; its link to rank " + std::to_string(l.peerRank) + " runs at " + percent(l.rateBps / l.groupMedianBps) +
           " of the others";
  return s;
}

std::string describeCleared(const Finding& f) {
  std::string s = "comm " + commIdText(f.commId) + ": ";
  if (f.kind == FindingKind::SlowLink)
    return s + "link rank " + std::to_string(f.rank) + " -> rank " + std::to_string(f.peerRank) +
           " runs at the others' rate again";
  return s + "rank " + std::to_string(f.rank) + where(f.host, f.addr) + " is no longer late";
}

}  // namespace icn::diagnose
