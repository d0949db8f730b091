#include "diagnose/hang_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <set>

#include "core/json.h"
#include "diagnose/summary.h"

namespace icn::diagnose {
namespace {

struct RankOwner {
  const ProcessReport* report = nullptr;
  std::string addr;
};

// One communicator's wait-for graph.
struct Graph {
  uint64_t commId = 0;
  int nranks = 0;
  std::map<int, RankOwner> owners;                       // ranks with a fresh report
  std::map<int, std::pair<std::string, std::string>> seenAs;  // rank -> (host, addr) as its peers name it
  std::map<int, std::map<int, std::vector<const WaitEntry*>>> out;  // from -> to -> waits
  std::map<int, std::set<int>> in;  // to -> the ranks that wait on it
  std::set<int> targets;

  bool waits(int r) const { return out.count(r) && !out.at(r).empty(); }
  // Ranks that wait on any of `roots`, directly or through others: each one's next hop towards them, and the
  // farthest of them (the last a breadth-first walk from the roots reaches).
  struct Reach {
    std::map<int, int> next;
    int farthest = -1;
  };
  Reach waitingOn(const std::set<int>& roots) const {
    Reach r;
    std::deque<int> todo(roots.begin(), roots.end());
    std::set<int> seen(roots.begin(), roots.end());
    while (!todo.empty()) {
      const int at = todo.front();
      todo.pop_front();
      auto it = in.find(at);
      if (it == in.end()) continue;
      for (int from : it->second)
        if (seen.insert(from).second) {
          r.next[from] = at;
          r.farthest = from;
          todo.push_back(from);
        }
    }
    return r;
  }
};

// A peer's address without the port of the one connection it was seen on (its other connections have others).
std::string hostPart(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return addr;
  if (addr[0] == '[') return addr.substr(0, addr.find(']') + 1);
  return addr.find(':') == colon ? addr.substr(0, colon) : addr;  // several colons, no brackets: IPv6, no port
}

std::string bytesText(uint64_t b) {
  char s[32];
  if (b >= (uint64_t{1} << 30)) snprintf(s, sizeof s, "%.1f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (uint64_t{1} << 20)) snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024) snprintf(s, sizeof s, "%.1f KiB", static_cast<double>(b) / 1024);
  else snprintf(s, sizeof s, "%llu bytes", static_cast<unsigned long long>(b));
  return s;
}

std::string secs(double s) {
  char b[32];
  snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

// Texts name at most this many ranks of a list, and list at most kMaxEvidence waits: a hang of a large job stays
// a paragraph.
constexpr size_t kMaxNamed = 8, kMaxEvidence = 32;

std::string ranksText(const std::vector<int>& v) {
  std::string s;
  const size_t shown = std::min(v.size(), kMaxNamed);
  for (size_t i = 0; i < shown; i++) s += (i ? (i + 1 == v.size() ? " and " : ", ") : "") + std::to_string(v[i]);
  if (shown < v.size()) s += " and " + std::to_string(v.size() - shown) + " more";
  return s;
}

// "0 -> 1 -> 2", or "0 -> 1 -> ... -> 9 (10 ranks)" when long (ranks: how many distinct ranks the path holds).
std::string pathText(const std::vector<int>& v, size_t ranks = 0) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) {
    if (v.size() > kMaxNamed && i == kMaxNamed / 2) {
      s += " -> ...";
      i = v.size() - kMaxNamed / 2;
    }
    s += (s.empty() ? "" : " -> ") + std::to_string(v[i]);
  }
  if (v.size() > kMaxNamed) s += " (" + std::to_string(ranks ? ranks : v.size()) + " ranks)";
  return s;
}

void addEvidence(HangAnalysis* a, std::string line) {
  if (a->evidence.size() > kMaxEvidence) return;
  if (a->evidence.size() == kMaxEvidence) line = "... (more waits left out)";
  if (std::find(a->evidence.begin(), a->evidence.end(), line) == a->evidence.end()) a->evidence.push_back(line);
}

std::string where(const Graph& g, int r) {
  std::string host, addr;
  if (auto it = g.owners.find(r); it != g.owners.end()) {
    host = it->second.report->host;
    addr = it->second.addr;
  }
  if (auto it = g.seenAs.find(r); it != g.seenAs.end()) {
    if (host.empty()) host = it->second.first;
    if (addr.empty()) addr = it->second.second;
  }
  if (host.empty() && addr.empty()) return "";
  if (addr.empty()) return " on " + host;
  if (host.empty()) return " at " + addr;
  return " on " + host + " (" + addr + ")";
}

std::string waitText(const Graph& g, const WaitEntry& w) {
  std::string s = "rank " + std::to_string(w.rank) + where(g, w.rank) +
                  (w.dir == Dir::Recv ? " waits to receive from rank " : " waits to send to rank ") +
                  std::to_string(w.peerRank) + ": tag " + std::to_string(w.tag) + ", " + bytesText(w.bytesDone) +
                  " of " + bytesText(w.bytes);
  if (w.dir == Dir::Send) s += w.ready ? ", clear-to-send received" : ", no clear-to-send yet";
  else s += w.ready ? ", first byte received" : ", no byte yet";
  return s + ", posted " + secs(w.postedS) + " ago, no progress for " + secs(w.progressS);
}

// The oldest wait of `from` on `to`.
const WaitEntry* oldest(const Graph& g, int from, int to) {
  const WaitEntry* best = nullptr;
  for (const WaitEntry* w : g.out.at(from).at(to))
    if (!best || w->postedS > best->postedS) best = w;
  return best;
}

std::vector<Graph> buildGraphs(const std::vector<ProcessReport>& in, double staleS) {
  // The newest report of each process.
  std::map<std::pair<std::string, int>, const ProcessReport*> latest;
  for (const ProcessReport& r : in) {
    const ProcessReport*& slot = latest[{r.host, r.pid}];
    if (!slot || r.timeUnixMs > slot->timeUnixMs) slot = &r;
  }
  int64_t newest = 0;
  double after = 0;
  for (const auto& [k, r] : latest) {
    newest = std::max(newest, r->timeUnixMs);
    after = std::max(after, r->reportAfterS);
  }
  if (staleS <= 0) staleS = std::max(60.0, 2 * after);
  // When the stall began: the earliest last progress of a process that reports waits. A live process makes no
  // network progress in a stall either, so it writes a report within its ICN_HANG_REPORT_S (plus a tick) of that;
  // one whose newest report predates the stall while the others had that long does not vouch for itself (a process
  // stopped right after a stall it resumed from).
  int64_t stallStart = INT64_MAX;
  for (const auto& [k, r] : latest)
    if (r->stalled && !r->waits.empty())
      stallStart = std::min(stallStart, r->timeUnixMs - static_cast<int64_t>(r->noProgressS * 1000));
  constexpr double kReportSlackS = 2;  // the tick that writes a report, and clocks of different hosts
  auto silentSinceStall = [&](const ProcessReport& r) {
    return stallStart != INT64_MAX && r.timeUnixMs < stallStart &&
           static_cast<double>(newest - stallStart) >= (r.reportAfterS + kReportSlackS) * 1000;
  };
  std::map<uint64_t, Graph> graphs;
  for (const auto& [k, r] : latest) {
    for (const WaitEntry& w : r->waits) graphs[w.commId].commId = w.commId;  // communicators with a wait
  }
  for (const auto& [k, r] : latest) {
    const bool fresh = static_cast<double>(newest - r->timeUnixMs) <= staleS * 1000 && !silentSinceStall(*r);
    for (const RankEntry& e : r->ranks) {
      auto it = graphs.find(e.commId);
      if (it == graphs.end()) continue;
      it->second.nranks = std::max(it->second.nranks, e.nranks);
      if (fresh) it->second.owners[e.rank] = RankOwner{r, e.addr};
    }
    if (!fresh || !r->stalled) continue;
    for (const WaitEntry& w : r->waits) {
      Graph& g = graphs[w.commId];
      if (w.rank < 0 || w.peerRank < 0 || w.rank == w.peerRank) continue;
      g.out[w.rank][w.peerRank].push_back(&w);
      g.in[w.peerRank].insert(w.rank);
      g.targets.insert(w.peerRank);
      if (!w.peerHost.empty() || !w.peerAddr.empty()) g.seenAs[w.peerRank] = {w.peerHost, hostPart(w.peerAddr)};
      if (!g.owners.count(w.rank)) g.owners[w.rank] = RankOwner{r, ""};  // a rank known only by its waits
    }
  }
  std::vector<Graph> out;
  for (auto& [id, g] : graphs) out.push_back(std::move(g));
  return out;
}

// Tarjan's strongly connected components over the ranks that wait, without recursion (a chain of waits may be as
// long as the communicator).
std::vector<std::vector<int>> components(const Graph& g) {
  std::map<int, int> index, low;
  std::vector<int> stack;
  std::set<int> onStack;
  std::vector<std::vector<int>> sccs;
  int counter = 0;
  static const std::map<int, std::vector<const WaitEntry*>> kNone;
  auto edges = [&](int v) -> const std::map<int, std::vector<const WaitEntry*>>& {
    auto it = g.out.find(v);
    return it == g.out.end() ? kNone : it->second;
  };
  struct Frame {
    int v;
    std::map<int, std::vector<const WaitEntry*>>::const_iterator next;
  };
  for (const auto& [root, unused] : g.out) {
    if (index.count(root)) continue;
    std::vector<Frame> frames;
    auto enter = [&](int v) {
      index[v] = low[v] = counter++;
      stack.push_back(v);
      onStack.insert(v);
      frames.push_back({v, edges(v).begin()});
    };
    enter(root);
    while (!frames.empty()) {
      Frame& f = frames.back();
      const int v = f.v;
      if (f.next != edges(v).end()) {
        const int w = (f.next++)->first;
        if (!index.count(w)) enter(w);
        else if (onStack.count(w)) low[v] = std::min(low[v], index[w]);
        continue;
      }
      if (low[v] == index[v]) {
        std::vector<int> scc;
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          onStack.erase(w);
          scc.push_back(w);
        } while (w != v);
        std::sort(scc.begin(), scc.end());
        sccs.push_back(std::move(scc));
      }
      frames.pop_back();
      if (!frames.empty()) low[frames.back().v] = std::min(low[frames.back().v], low[v]);
    }
  }
  return sccs;
}

void addChain(const Graph& g, const std::set<int>& roots, HangAnalysis* a) {
  const Graph::Reach reach = g.waitingOn(roots);
  a->waitingOnRoot = static_cast<int>(reach.next.size());
  for (int x = reach.farthest; x >= 0;) {  // the farthest waiting rank, then its hops to the root
    a->chain.push_back(x);
    auto it = reach.next.find(x);
    x = it == reach.next.end() ? -1 : it->second;
  }
}

std::string chainText(const HangAnalysis& a) { return a.chain.size() < 2 ? "" : " (" + pathText(a.chain) + ")"; }

void chainEvidence(const Graph& g, HangAnalysis* a) {
  for (size_t i = 0; i + 1 < a->chain.size() && a->evidence.size() <= kMaxEvidence; i++)
    addEvidence(a, waitText(g, *oldest(g, a->chain[i], a->chain[i + 1])));
}

bool missingRoot(const Graph& g, HangAnalysis* a) {
  std::vector<int> waited;
  for (int m : a->missing)
    if (g.targets.count(m)) waited.push_back(m);
  if (waited.empty()) return false;
  // Most waited on first.
  std::map<int, size_t> count;
  for (int m : waited) count[m] = g.waitingOn({m}).next.size();
  std::stable_sort(waited.begin(), waited.end(), [&](int x, int y) { return count[x] > count[y]; });
  a->kind = RootKind::MissingProcess;
  a->roots = waited;
  addChain(g, {waited.begin(), waited.end()}, a);
  const int r = waited.front();
  const std::vector<int> direct(g.in.at(r).begin(), g.in.at(r).end());
  a->summary = "Rank " + std::to_string(r) + where(g, r) +
               " did not report: its process is stopped (SIGSTOP), dead, or cannot write its report, and it is the "
               "prime suspect. " + std::to_string(direct.size()) +
               (direct.size() == 1 ? " rank waits" : " ranks wait") +
               " on it directly (" + ranksText(direct) + "); " + std::to_string(a->waitingOnRoot) + " of the " +
               std::to_string(a->reporting) + " ranks that reported wait on it directly or through others" +
               chainText(*a) + ".";
  if (waited.size() > 1)
    a->summary += " Other ranks that did not report and are waited on: " +
                  ranksText(std::vector<int>(waited.begin() + 1, waited.end())) + ".";
  for (int from : direct) addEvidence(a, waitText(g, *oldest(g, from, r)));
  chainEvidence(g, a);
  return true;
}

bool idleRoot(const Graph& g, HangAnalysis* a) {
  std::vector<int> sinks;
  for (int t : g.targets)
    if (g.owners.count(t) && !g.waits(t)) sinks.push_back(t);
  if (sinks.empty()) return false;
  std::map<int, size_t> count;
  for (int s : sinks) count[s] = g.waitingOn({s}).next.size();
  std::stable_sort(sinks.begin(), sinks.end(), [&](int x, int y) { return count[x] > count[y]; });
  a->kind = RootKind::IdleRank;
  a->roots = sinks;
  const int r = sinks.front();
  addChain(g, {r}, a);
  const ProcessReport* p = g.owners.at(r).report;
  a->summary = "Rank " + std::to_string(r) + where(g, r) + " waits on no peer while " +
               std::to_string(a->waitingOnRoot) + " of " + std::to_string(a->reporting) +
               " reporting ranks wait on it, directly or through others" + chainText(*a) +
               ": its process is alive (pid " + std::to_string(p->pid) +
               " reported) but outside the network: computing, blocked in host code, or in another collective than "
               "its peers.";
  if (sinks.size() > 1)
    a->summary += " Other idle ranks that are waited on: " +
                  ranksText(std::vector<int>(sinks.begin() + 1, sinks.end())) + ".";
  a->evidence.push_back("rank " + std::to_string(r) + where(g, r) + " (pid " + std::to_string(p->pid) +
                        ") reported no pending operation; no network progress for " + secs(p->noProgressS) +
                        (p->stalled ? "" : " (its progress resumed)"));
  chainEvidence(g, a);
  return true;
}

// In a group of ranks that wait only on each other: a send whose receive (same tag) is pending too.
bool stuckOrCycle(const Graph& g, HangAnalysis* a) {
  std::vector<std::vector<int>> sccs = components(g);
  const std::vector<int>* best = nullptr;
  size_t bestReach = 0;
  for (const auto& scc : sccs) {
    if (scc.size() < 2) continue;
    const std::set<int> members(scc.begin(), scc.end());
    bool terminal = true;
    for (int v : scc)
      for (const auto& [w, waits] : g.out.at(v))
        if (!members.count(w)) terminal = false;
    if (!terminal) continue;
    const size_t reach = g.waitingOn(members).next.size();
    if (!best || reach > bestReach) best = &scc, bestReach = reach;
  }
  if (!best) return false;
  const std::set<int> members(best->begin(), best->end());
  const WaitEntry *sendW = nullptr, *recvW = nullptr;
  auto score = [](const WaitEntry* s, const WaitEntry* r) {
    return (s->bytesDone || r->bytesDone ? 2 : 0) + (s->ready || r->ready ? 1 : 0);
  };
  for (int x : *best)
    for (const auto& [y, waits] : g.out.at(x)) {
      if (!members.count(y) || !g.out.count(y) || !g.out.at(y).count(x)) continue;
      for (const WaitEntry* s : waits) {
        if (s->dir != Dir::Send) continue;
        // A receive takes only messages with its tag: a send and a receive with different tags do not wait on
        // each other (their calls do not match: a cycle, below), whatever the link does.
        for (const WaitEntry* r : g.out.at(y).at(x))
          if (r->dir == Dir::Recv && r->tag == s->tag && (!sendW || score(s, r) > score(sendW, recvW)))
            sendW = s, recvW = r;
      }
    }
  addChain(g, members, a);
  if (sendW) {
    a->kind = RootKind::StuckLink;
    a->linkFrom = sendW->rank;
    a->linkTo = sendW->peerRank;
    a->roots = {sendW->rank, sendW->peerRank};
    const uint64_t through = std::max(sendW->bytesDone, recvW->bytesDone);
    a->summary = "The link rank " + std::to_string(a->linkFrom) + where(g, a->linkFrom) + " -> rank " +
                 std::to_string(a->linkTo) + where(g, a->linkTo) + " stopped moving bytes: rank " +
                 std::to_string(a->linkFrom) + "'s send of " + bytesText(sendW->bytes) + " (tag " +
                 std::to_string(sendW->tag) + ") and rank " + std::to_string(a->linkTo) +
                 "'s receive wait on each other with " + bytesText(through) + " through and no progress for " +
                 secs(std::min(sendW->progressS, recvW->progressS)) + "; " + std::to_string(a->waitingOnRoot) +
                 " other ranks wait behind it" + chainText(*a) +
                 ". Check that path (NICs, switch ports, MTU, firewall) and both hosts' kernel logs.";
    a->evidence.push_back(waitText(g, *sendW));
    a->evidence.push_back(waitText(g, *recvW));
  } else {
    a->kind = RootKind::Cycle;
    // Walk the group from its smallest rank until a rank repeats.
    std::vector<int> path{best->front()};
    std::set<int> on{best->front()};
    while (true) {
      int nextRank = -1;
      for (const auto& [w, waits] : g.out.at(path.back()))
        if (members.count(w)) { nextRank = w; break; }
      if (on.count(nextRank)) {
        path.erase(path.begin(), std::find(path.begin(), path.end(), nextRank));
        break;
      }
      path.push_back(nextRank);
      on.insert(nextRank);
    }
    a->roots = path;
    std::vector<int> around = path;
    around.push_back(path.front());
    a->summary = "Ranks " + pathText(around, path.size()) +
                 " wait on each other in a cycle with no transfer in flight between them (each waits on the next "
                 "to send or to take its bytes): they called mismatched operations (another collective, count or "
                 "order); " + std::to_string(a->waitingOnRoot) + " other ranks wait behind them.";
    for (size_t i = 0; i < path.size() && a->evidence.size() <= kMaxEvidence; i++)
      addEvidence(a, waitText(g, *oldest(g, path[i], path[(i + 1) % path.size()])));
  }
  return true;
}

HangAnalysis analyze(const Graph& g) {
  HangAnalysis a;
  a.commId = g.commId;
  a.nranks = g.nranks;
  a.reporting = static_cast<int>(g.owners.size());
  std::set<int> expected;
  if (g.nranks > 0)
    for (int r = 0; r < g.nranks; r++) expected.insert(r);
  for (const auto& [r, o] : g.owners) expected.insert(r);
  expected.insert(g.targets.begin(), g.targets.end());
  for (int r : expected)
    if (!g.owners.count(r)) a.missing.push_back(r);
  if (!missingRoot(g, &a) && !idleRoot(g, &a) && !stuckOrCycle(g, &a)) {
    a.kind = RootKind::None;
    a.summary = "No rank of this communicator waits on the network: the hang, if there is one, is elsewhere.";
  }
  std::vector<int> unwaited;
  for (int m : a.missing)
    if (!g.targets.count(m)) unwaited.push_back(m);
  if (!unwaited.empty())
    a.evidence.push_back("no report from rank" + std::string(unwaited.size() > 1 ? "s " : " ") + ranksText(unwaited) +
                         " (no rank waits on " + (unwaited.size() > 1 ? "them)" : "it)"));
  return a;
}

}  // namespace

const char* rootKindName(RootKind k) {
  switch (k) {
    case RootKind::MissingProcess: return "missing_process";
    case RootKind::IdleRank: return "idle_rank";
    case RootKind::StuckLink: return "stuck_link";
    case RootKind::Cycle: return "cycle";
    case RootKind::None: break;
  }
  return "none";
}

std::vector<HangAnalysis> analyzeHang(const std::vector<ProcessReport>& reports, double staleS) {
  std::vector<HangAnalysis> out;
  for (const Graph& g : buildGraphs(reports, staleS)) out.push_back(analyze(g));
  std::stable_sort(out.begin(), out.end(),
                   [](const HangAnalysis& x, const HangAnalysis& y) { return x.waitingOnRoot > y.waitingOnRoot; });
  return out;
}

std::string toJson(const HangAnalysis& a) {
  auto list = [](const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::string o = "{\"commId\":\"" + commIdText(a.commId) + "\",\"kind\":\"" + rootKindName(a.kind) +
                  "\",\"roots\":" + list(a.roots) + ",\"link_from\":" + std::to_string(a.linkFrom) +
                  ",\"link_to\":" + std::to_string(a.linkTo) + ",\"missing\":" + list(a.missing) +
                  ",\"chain\":" + list(a.chain) + ",\"waiting_on_root\":" + std::to_string(a.waitingOnRoot) +
                  ",\"reporting\":" + std::to_string(a.reporting) + ",\"nranks\":" + std::to_string(a.nranks) +
                  ",\"summary\":" + json::quote(a.summary) + ",\"evidence\":[";
  for (size_t i = 0; i < a.evidence.size(); i++) o += (i ? "," : "") + json::quote(a.evidence[i]);
  return o + "]}";
}

}  // namespace icn::diagnose
