// icn-heatmap: shows a heatmap snapshot (ICN_HEATMAP_FILE, default $XDG_RUNTIME_DIR/icn/heatmap-<pid>.json) in the terminal
// and optionally as an SVG picture.
//   icn-heatmap FILE [--svg OUT.svg] [--watch SECONDS]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/json.h"
#include "view.h"

namespace icn::heatmapview {

bool load(const std::string& path, Snapshot* out, std::string* why) {
  std::ifstream in(path);
  if (!in) {
    *why = path + ": " + strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json::Value v;
  if (!json::parse(ss.str(), v, *why)) {
    *why = path + ": " + *why;
    return false;
  }
  if (v.number("version", 0) != 1) {
    *why = path + ": unsupported snapshot version";
    return false;
  }
  out->host = v.string("host", "?");
  out->pid = static_cast<int>(v.number("pid", 0));
  out->timeMs = v.number("time_ms", 0);
  const json::Value* comms = v.get("comms");
  if (!comms) return true;
  for (const json::Value& c : comms->arr) {
    Comm cm;
    cm.commId = c.string("commId", "?");
    cm.rank = static_cast<int>(c.number("rank", -1));
    cm.nranks = static_cast<int>(c.number("nranks", 0));
    if (const json::Value* peers = c.get("peers"))
      for (const json::Value& p : peers->arr)
        cm.peers.push_back(Peer{static_cast<int>(p.number("peerRank", -1)), p.string("peer", "?"),
                                static_cast<int>(p.number("channel", 0)), p.number("send_bytes", 0),
                                p.number("send_msgs", 0), p.number("recv_bytes", 0), p.number("recv_msgs", 0)});
    if (const json::Value* colls = c.get("collectives"))
      for (const json::Value& k : colls->arr)
        cm.colls.push_back(Coll{k.string("coll", "?"), k.string("algo", "?"), k.string("proto", "?"),
                                static_cast<int>(k.number("bucket_log2", 0)), static_cast<int>(k.number("channels", 0)),
                                k.number("count", 0), k.number("mean_us", 0), k.number("min_us", 0),
                                k.number("p50_us", 0)});
    out->comms.push_back(std::move(cm));
  }
  return true;
}

}  // namespace icn::heatmapview

namespace {
using namespace icn::heatmapview;

std::string human(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, ++i;
  char buf[32];
  snprintf(buf, sizeof buf, i ? "%.1f %s" : "%.0f %s", b, u[i]);
  return buf;
}

std::string bar(double v, double max, int width) {
  static const char* shades[] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};
  std::string s;
  double cells = max > 0 ? v / max * width : 0;
  for (int i = 0; i < width; ++i) {
    double f = std::clamp(cells - i, 0.0, 1.0);
    s += shades[static_cast<int>(std::round(f * 4))];
  }
  return s;
}

void printTerminal(const Snapshot& s) {
  printf("ICN heatmap  host %s  pid %d  %zu communicator rank(s)\n", s.host.c_str(), s.pid, s.comms.size());
  for (const Comm& c : s.comms) {
    printf("\ncomm %s  rank %d/%d\n", c.commId.c_str(), c.rank, c.nranks);
    if (!c.peers.empty()) {
      double max = 0;
      for (const Peer& p : c.peers) max = std::max(max, p.sendBytes + p.recvBytes);
      printf("  %-6s %-24s %3s  %12s %12s  %s\n", "peer", "address", "ch", "sent", "received", "traffic");
      for (const Peer& p : c.peers)
        printf("  %-6d %-24s %3d  %12s %12s  %s\n", p.peerRank, p.peer.c_str(), p.channel, human(p.sendBytes).c_str(),
               human(p.recvBytes).c_str(), bar(p.sendBytes + p.recvBytes, max, 24).c_str());
    }
    if (!c.colls.empty()) {
      // Group by (collective, bucket); mark the fastest configuration by median.
      std::map<std::pair<std::string, int>, std::vector<const Coll*>> rows;
      for (const Coll& k : c.colls) rows[{k.coll, k.bucket}].push_back(&k);
      printf("  %-13s %-12s %-18s %6s %10s %10s\n", "collective", "size", "algo/proto/ch", "count", "p50 us",
             "mean us");
      for (auto& [key, ks] : rows) {
        double best = 1e300;
        for (const Coll* k : ks) best = std::min(best, k->p50Us);
        std::string range = human(std::ldexp(1.0, key.second));
        for (const Coll* k : ks) {
          char cfg[48];
          snprintf(cfg, sizeof cfg, "%s/%s/%d", k->algo.c_str(), k->proto.c_str(), k->channels);
          printf("  %-13s %-12s %-18s %6.0f %10.2f %10.2f %s\n", key.first.c_str(), range.c_str(), cfg, k->count,
                 k->p50Us, k->meanUs, k->p50Us == best ? "*" : "");
        }
      }
    }
    if (c.peers.empty() && c.colls.empty()) printf("  (no traffic measured yet)\n");
  }
}

int usage() {
  fprintf(stderr, "usage: icn-heatmap SNAPSHOT.json [--svg OUT.svg] [--watch SECONDS]\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  std::string file, svg;
  double watch = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--svg" && i + 1 < argc) svg = argv[++i];
    else if (a == "--watch" && i + 1 < argc) watch = atof(argv[++i]);
    else if (a == "-h" || a == "--help") return usage();
    else if (file.empty() && a[0] != '-') file = a;
    else return usage();
  }
  if (file.empty()) return usage();
  for (;;) {
    Snapshot s;
    std::string why;
    if (!load(file, &s, &why)) {
      fprintf(stderr, "icn-heatmap: %s\n", why.c_str());
      return 1;
    }
    if (watch > 0) printf("\033[2J\033[H");
    printTerminal(s);
    if (!svg.empty()) {
      std::ofstream out(svg);
      out << renderSvg(s);
      if (!out) {
        fprintf(stderr, "icn-heatmap: cannot write %s\n", svg.c_str());
        return 1;
      }
    }
    if (watch <= 0) return 0;
    fflush(stdout);
    usleep(static_cast<useconds_t>(watch * 1e6));
  }
}
