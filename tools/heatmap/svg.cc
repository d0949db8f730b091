// SVG picture of a snapshot: per communicator rank, a peers x channels traffic grid and a size-bucket x
// algorithm/protocol grid coloured by measured median time relative to the fastest in the row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "view.h"

namespace icn::heatmapview {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// 0 -> pale yellow, 1 -> dark red.
std::string heat(double f) {
  f = std::clamp(f, 0.0, 1.0);
  int r = static_cast<int>(255 - 80 * f), g = static_cast<int>(245 - 215 * f), b = static_cast<int>(200 - 180 * f);
  char buf[16];
  snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

}  // namespace

std::string renderSvg(const Snapshot& s) {
  const int cell = 26, left = 170, top = 40;
  std::string body;
  int y = top;
  char buf[512];
  for (const Comm& c : s.comms) {
    snprintf(buf, sizeof buf, "<text x='10' y='%d' font-weight='bold'>comm %s rank %d/%d</text>\n", y,
             esc(c.commId).c_str(), c.rank, c.nranks);
    body += buf;
    y += 14;
    if (!c.peers.empty()) {
      std::set<int> chans;
      std::map<std::string, std::map<int, double>> grid;
      double max = 0;
      for (const Peer& p : c.peers) {
        chans.insert(p.channel);
        std::string row = std::to_string(p.peerRank) + " " + p.peer;
        grid[row][p.channel] += p.sendBytes + p.recvBytes;
        max = std::max(max, grid[row][p.channel]);
      }
      int col = 0;
      for (int ch : chans) {
        snprintf(buf, sizeof buf, "<text x='%d' y='%d' font-size='10'>ch%d</text>\n", left + col++ * cell, y + 10, ch);
        body += buf;
      }
      y += 14;
      for (auto& [row, vals] : grid) {
        snprintf(buf, sizeof buf, "<text x='10' y='%d' font-size='11'>%s</text>\n", y + 17, esc(row).c_str());
        body += buf;
        col = 0;
        for (int ch : chans) {
          double v = vals.count(ch) ? vals[ch] : 0;
          snprintf(buf, sizeof buf,
                   "<rect x='%d' y='%d' width='%d' height='%d' fill='%s' stroke='#888'><title>%.0f bytes</title></rect>\n",
                   left + col++ * cell, y, cell, cell, heat(max > 0 ? v / max : 0).c_str(), v);
          body += buf;
        }
        y += cell;
      }
      y += 16;
    }
    if (!c.colls.empty()) {
      std::set<std::string> cfgs;
      std::map<std::pair<std::string, int>, std::map<std::string, double>> rows;
      for (const Coll& k : c.colls) {
        std::string cfg = k.algo + "/" + k.proto + "/" + std::to_string(k.channels);
        cfgs.insert(cfg);
        rows[{k.coll, k.bucket}][cfg] = k.p50Us;
      }
      int col = 0;
      for (const std::string& cfg : cfgs) {
        snprintf(buf, sizeof buf, "<text x='%d' y='%d' font-size='9' transform='rotate(-45 %d %d)'>%s</text>\n",
                 left + col * cell + 4, y + 40, left + col * cell + 4, y + 40, esc(cfg).c_str());
        body += buf;
        ++col;
      }
      y += 48;
      for (auto& [key, vals] : rows) {
        double best = 1e300, worst = 0;
        for (auto& [cfg, us] : vals) best = std::min(best, us), worst = std::max(worst, us);
        snprintf(buf, sizeof buf, "<text x='10' y='%d' font-size='11'>%s 2^%d B</text>\n", y + 17,
                 esc(key.first).c_str(), key.second);
        body += buf;
        col = 0;
        for (const std::string& cfg : cfgs) {
          auto it = vals.find(cfg);
          if (it != vals.end()) {
            double f = worst > best ? (it->second - best) / (worst - best) : 0;
            snprintf(buf, sizeof buf,
                     "<rect x='%d' y='%d' width='%d' height='%d' fill='%s' stroke='#888'><title>%s %.2f us</title></rect>\n",
                     left + col * cell, y, cell, cell, heat(f).c_str(), esc(cfg).c_str(), it->second);
            body += buf;
            if (it->second == best) {
              snprintf(buf, sizeof buf, "<text x='%d' y='%d' font-size='12'>*</text>\n", left + col * cell + 9, y + 18);
              body += buf;
            }
          }
          ++col;
        }
        y += cell;
      }
      y += 20;
    }
    y += 10;
  }
  int width = 900;
  snprintf(buf, sizeof buf,
           "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>\n"
           "<rect width='100%%' height='100%%' fill='white'/>\n"
           "<text x='10' y='20' font-size='14'>ICN heatmap: host %s pid %d (traffic: bytes per peer x channel; "
           "collectives: median GPU time, * fastest)</text>\n",
           width, y + 20, esc(s.host).c_str(), s.pid);
  return std::string(buf) + body + "</svg>\n";
}

}  // namespace icn::heatmapview
