#include "topo/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/json.h"
#include "topo/xml_node.h"

namespace icn::topo {

double CommTraffic::total() const {
  double s = 0;
  for (double b : bytes) s += b;
  return s / 2;
}

Status mergeHeatmap(const std::string& text, const std::string& origin, std::map<std::string, CommTraffic>& out,
                    std::string& err) {
  json::Value doc;
  if (!json::parse(text, doc, err)) {
    err = origin + ": " + err;
    return Status::InvalidArgument;
  }
  auto bad = [&](const std::string& what) {
    err = origin + ": " + what;
    return Status::InvalidArgument;
  };
  if (!doc.isObject()) return bad("not a JSON object");
  if (doc.number("version", -1) != 1) return bad("unsupported heatmap version (want 1)");
  const json::Value* comms = doc.get("comms");
  if (!comms || !comms->isArray()) return bad("missing \"comms\" array");
  for (const json::Value& c : comms->arr) {
    std::string id = c.string("commId");
    double nr = c.number("nranks", -1), rank = c.number("rank", -1);
    if (id.empty()) return bad("comm without commId");
    if (nr < 1 || nr > 4096 || nr != std::floor(nr)) return bad("comm " + id + ": bad nranks");
    if (rank < 0 || rank >= nr || rank != std::floor(rank)) return bad("comm " + id + ": bad rank");
    int n = static_cast<int>(nr), r = static_cast<int>(rank);
    CommTraffic& t = out[id];
    if (t.nranks == 0) {
      t.commId = id;
      t.nranks = n;
      t.bytes.assign(static_cast<size_t>(n) * n, 0);
      t.reported.assign(static_cast<size_t>(n), false);
    } else if (t.nranks != n) {
      return bad("comm " + id + ": nranks " + std::to_string(n) + " disagrees with " + std::to_string(t.nranks));
    }
    t.reported[static_cast<size_t>(r)] = true;
    const json::Value* peers = c.get("peers");
    if (!peers) continue;
    if (!peers->isArray()) return bad("comm " + id + ": \"peers\" is not an array");
    for (const json::Value& p : peers->arr) {
      double pr = p.number("peerRank", -1);
      if (pr < 0 || pr >= n || pr != std::floor(pr)) return bad("comm " + id + ": bad peerRank");
      double sb = p.number("send_bytes", 0), rb = p.number("recv_bytes", 0);
      if (sb < 0 || rb < 0) return bad("comm " + id + ": negative byte count");
      int q = static_cast<int>(pr);
      if (q == r) continue;
      t.bytes[static_cast<size_t>(r) * n + q] += sb + rb;
      t.bytes[static_cast<size_t>(q) * n + r] += sb + rb;
    }
  }
  return Status::Ok;
}

Status loadHeatmaps(const std::vector<std::string>& files, std::map<std::string, CommTraffic>& out, std::string& err) {
  if (files.empty()) {
    err = "no heatmap file given";
    return Status::InvalidArgument;
  }
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      err = "cannot open " + f;
      return Status::InvalidArgument;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    ICN_CHECK(mergeHeatmap(ss.str(), f, out, err));
  }
  return Status::Ok;
}

double ringWeight(const CommTraffic& t, const std::vector<int>& ring) {
  double w = 0;
  for (size_t i = 0; i < ring.size() && ring.size() > 1; i++) w += t.at(ring[i], ring[(i + 1) % ring.size()]);
  return ring.size() == 2 ? w / 2 : w;
}

namespace {

// Held-Karp over subsets that contain rank 0: best[mask][last] = max weight of a path 0 -> ... -> last.
std::vector<int> exactRing(const CommTraffic& t) {
  int n = t.nranks;
  size_t full = size_t{1} << n;
  const double neg = -std::numeric_limits<double>::infinity();
  std::vector<double> best(full * n, neg);
  std::vector<int8_t> from(full * n, -1);
  best[1 * n + 0] = 0;
  for (size_t mask = 1; mask < full; mask += 2) {  // odd masks: rank 0 always included
    for (int last = 0; last < n; last++) {
      double cur = best[mask * n + last];
      if (cur == neg) continue;
      for (int nx = 1; nx < n; nx++) {
        if (mask & (size_t{1} << nx)) continue;
        size_t nm = mask | (size_t{1} << nx);
        double v = cur + t.at(last, nx);
        if (v > best[nm * n + nx]) {
          best[nm * n + nx] = v;
          from[nm * n + nx] = static_cast<int8_t>(last);
        }
      }
    }
  }
  size_t all = full - 1;
  int end = 1;
  double bestV = neg;
  for (int last = 1; last < n; last++) {
    double v = best[all * n + last] + t.at(last, 0);
    if (v > bestV) {
      bestV = v;
      end = last;
    }
  }
  std::vector<int> ring;
  for (size_t mask = all; end >= 0;) {
    ring.push_back(end);
    int prev = from[mask * n + end];
    mask &= ~(size_t{1} << end);
    end = prev;
  }
  std::reverse(ring.begin(), ring.end());
  return ring;
}

// Greedy edge selection (heaviest first, degree <= 2, no early cycle), then 2-opt until no gain.
std::vector<int> greedyRing(const CommTraffic& t) {
  int n = t.nranks;
  struct Edge {
    double w;
    int a, b;
  };
  std::vector<Edge> edges;
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) edges.push_back({t.at(a, b), a, b});
  std::stable_sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.w > y.w; });
  std::vector<int> deg(n, 0), comp(n);
  std::iota(comp.begin(), comp.end(), 0);
  std::function<int(int)> find = [&](int x) { return comp[x] == x ? x : comp[x] = find(comp[x]); };
  std::vector<std::vector<int>> adj(n);
  int used = 0;
  for (const Edge& e : edges) {
    if (used == n - 1) break;
    if (deg[e.a] >= 2 || deg[e.b] >= 2 || find(e.a) == find(e.b)) continue;
    comp[find(e.a)] = find(e.b);
    deg[e.a]++;
    deg[e.b]++;
    adj[e.a].push_back(e.b);
    adj[e.b].push_back(e.a);
    used++;
  }
  int start = 0;
  while (deg[start] != 1 && start < n - 1) start++;
  std::vector<int> ring;
  std::vector<bool> seen(n, false);
  for (int cur = start, prev = -1; cur >= 0 && !seen[cur];) {
    ring.push_back(cur);
    seen[cur] = true;
    int next = -1;
    for (int x : adj[cur])
      if (x != prev && !seen[x]) next = x;
    prev = cur;
    cur = next;
  }
  for (int i = 0; i < n; i++)
    if (!seen[i]) ring.push_back(i);
  for (bool improved = true; improved;) {  // 2-opt: reverse ring[i+1..j] when it raises the total
    improved = false;
    for (int i = 0; i < n - 1; i++)
      for (int j = i + 2; j < n; j++) {
        int a = ring[i], b = ring[i + 1], c = ring[j], d = ring[(j + 1) % n];
        if (a == d) continue;
        double gain = t.at(a, c) + t.at(b, d) - t.at(a, b) - t.at(c, d);
        if (gain > 1e-9 * (1 + std::fabs(t.at(a, b)))) {
          std::reverse(ring.begin() + i + 1, ring.begin() + j + 1);
          improved = true;
        }
      }
  }
  return ring;
}

}  // namespace

std::vector<int> ringOrder(const CommTraffic& t) {
  int n = t.nranks;
  if (n <= 0) return {};
  if (n <= 3) {
    std::vector<int> r(n);
    std::iota(r.begin(), r.end(), 0);
    return r;
  }
  std::vector<int> ring = n <= 16 ? exactRing(t) : greedyRing(t);
  auto it = std::find(ring.begin(), ring.end(), 0);
  std::rotate(ring.begin(), it, ring.end());
  if (ring.size() > 2 && ring[1] > ring.back()) std::reverse(ring.begin() + 1, ring.end());  // canonical direction
  return ring;
}

}  // namespace icn::topo
