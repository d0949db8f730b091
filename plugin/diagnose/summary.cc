#include "diagnose/summary.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "core/json.h"

namespace icn::diagnose {
namespace {

std::string num(double v) { return json::number(v, 9); }

bool boundedString(const json::Value& o, const char* key, std::string* out) {
  const json::Value* v = o.get(key);
  if (!v) return true;  // optional
  if (!v->isString() || v->str.size() > kMaxNameBytes) return false;
  *out = v->str;
  return true;
}

bool nonNegative(const json::Value& o, const char* key, double max, double* out) {
  const json::Value* v = o.get(key);
  if (!v) return true;
  if (!v->isNumber() || !(v->num >= 0) || v->num > max) return false;
  *out = v->num;
  return true;
}

// Bytes per second at a histogram's median pace; a pace under the histogram's first bucket counts as that bucket.
double paceRate(const WaitHistogram::Counts& pace) {
  const double s = std::max(pace.quantileS(0.5), WaitHistogram::bucketHighS(0));
  return static_cast<double>(LinkMonitor::kPaceBytes) / s;
}

bool rankValue(const json::Value& o, const char* key, int* out) {
  const json::Value* v = o.get(key);
  if (!v || !v->isNumber() || v->num < -1 || v->num > (1 << 24) || v->num != std::floor(v->num)) return false;
  *out = static_cast<int>(v->num);
  return true;
}

bool fromObject(const json::Value& o, PeerSummary* s, std::string* why) {
  if (!o.isObject()) return (*why = "an entry is not an object"), false;
  if (!parseCommId(o.string("commId"), &s->commId)) return (*why = "bad commId"), false;
  if (!rankValue(o, "rank", &s->rank) || !rankValue(o, "peerRank", &s->peerRank))
    return (*why = "bad rank or peerRank"), false;
  const std::string dir = o.string("dir");
  if (dir != "send" && dir != "recv") return (*why = "bad dir"), false;
  s->dir = dir == "send" ? Dir::Send : Dir::Recv;
  if (!boundedString(o, "host", &s->host) || !boundedString(o, "addr", &s->addr) ||
      !boundedString(o, "peerHost", &s->peerHost) || !boundedString(o, "peerAddr", &s->peerAddr))
    return (*why = "a name is not a string of at most 255 bytes"), false;
  constexpr double kDay = 86400, kCount = 1e12, kRate = 1e15;
  double links = 0, pending = 0, count = 0, arrivals = 0, wire = 0;
  WindowFigures& f = s->fig;
  if (!nonNegative(o, "links", kCount, &links) || !nonNegative(o, "pending", kCount, &pending) ||
      !nonNegative(o, "count", kCount, &count) || !nonNegative(o, "arrivals", kCount, &arrivals) ||
      !nonNegative(o, "wait_median_s", kDay, &f.waitMedianS) || !nonNegative(o, "wait_p90_s", kDay, &f.waitP90S) ||
      !nonNegative(o, "wait_mean_s", kDay, &f.waitMeanS) ||
      !nonNegative(o, "arrival_median_s", kDay, &f.arrivalMedianS) ||
      !nonNegative(o, "arrival_p90_s", kDay, &f.arrivalP90S) || !nonNegative(o, "rate_Bps", kRate, &f.rateBps) ||
      !nonNegative(o, "rate_ratio", 1e6, &f.rateRatio) || !nonNegative(o, "rate_bytes", kRate, &f.rateBytes) ||
      !nonNegative(o, "rate_wire", 1, &wire) || !nonNegative(o, "stall_share", 1, &f.stallShare))
    return (*why = "a figure is missing its range"), false;
  s->links = static_cast<uint32_t>(std::min(links, 4e9));
  s->pending = static_cast<uint32_t>(std::min(pending, 4e9));
  f.count = static_cast<uint32_t>(std::min(count, 4e9));
  f.arrivals = static_cast<uint32_t>(std::min(arrivals, 4e9));
  f.rateWire = wire >= 0.5;
  return true;
}

}  // namespace

std::string commIdText(uint64_t commId) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, commId);
  return b;
}

bool parseCommId(const std::string& text, uint64_t* out) {
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return false;
  uint64_t v = 0;
  for (size_t i = 2; i < text.size(); i++) {
    const char c = text[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::vector<PeerSummary> summarize(const std::vector<std::shared_ptr<LinkMonitor>>& links) {
  struct Acc {
    PeerSummary s;
    WindowCounts window;
    WaitHistogram::Counts pace;          // the messages' paces since the connections opened
    uint64_t wireBytes = 0, wireNs = 0;  // the wire measure since the connections opened
  };
  std::map<std::tuple<uint64_t, int, int, int>, Acc> groups;
  for (const auto& l : links) {
    if (!l) continue;
    const LinkInfo& i = l->info();
    Acc& a = groups[{i.commId, i.rank, i.peerRank, static_cast<int>(i.dir)}];
    if (a.s.links == 0) {
      a.s.commId = i.commId;
      a.s.rank = i.rank;
      a.s.peerRank = i.peerRank;
      a.s.dir = i.dir;
      a.s.host = i.host;
      a.s.addr = i.addr;
      a.s.peerHost = i.peerHost;
      a.s.peerAddr = i.peerAddr;
    }
    a.s.links++;
    a.s.pending += l->pending();
    a.window += l->takeWindow();
    a.wireBytes += l->wireBytes();
    a.wireNs += l->wireNs();
    a.pace += l->paceTotals();
  }
  std::vector<PeerSummary> out;
  out.reserve(groups.size());
  for (auto& [key, a] : groups) {
    const uint32_t links = a.s.links, pending = a.s.pending;
    a.s.fig = figures(a.window);
    a.s.links = links;
    a.s.pending = pending;
    const WindowCounts& w = a.window;
    if (w.wireNs >= kWireMinNs && w.wireBytes >= kWireMinBytes) {
      // The link's own pace, when the transport measured it: what polling threads and slow readers do not bend.
      a.s.fig.rateBps = static_cast<double>(w.wireBytes) * 1e9 / static_cast<double>(w.wireNs);
      a.s.fig.rateRatio = a.s.fig.rateBps / (static_cast<double>(a.wireBytes) * 1e9 / static_cast<double>(a.wireNs));
      a.s.fig.rateBytes = w.pace.total ? static_cast<double>(w.rateBytes) / static_cast<double>(w.pace.total) : 0;
      a.s.fig.rateWire = true;
    } else if (w.pace.total >= LinkMonitor::kRateMinMessages) {
      // The messages' median pace (link_monitor.h), against the same median since the connections opened.
      a.s.fig.rateBps = paceRate(w.pace);
      a.s.fig.rateRatio = a.s.fig.rateBps / paceRate(a.pace);
      a.s.fig.rateBytes = static_cast<double>(w.rateBytes) / static_cast<double>(w.pace.total);
    }
    out.push_back(std::move(a.s));
  }
  return out;
}

std::string toJson(const PeerSummary& s) {
  const WindowFigures& f = s.fig;
  std::string o = "{\"commId\":\"" + commIdText(s.commId) + "\",\"rank\":" + std::to_string(s.rank) +
                  ",\"peerRank\":" + std::to_string(s.peerRank) + ",\"dir\":\"" + dirName(s.dir) + "\"";
  o += ",\"host\":" + json::quote(s.host) + ",\"addr\":" + json::quote(s.addr) +
       ",\"peerHost\":" + json::quote(s.peerHost) + ",\"peerAddr\":" + json::quote(s.peerAddr);
  o += ",\"links\":" + std::to_string(s.links) + ",\"pending\":" + std::to_string(s.pending) +
       ",\"count\":" + std::to_string(f.count) + ",\"wait_median_s\":" + num(f.waitMedianS) +
       ",\"wait_p90_s\":" + num(f.waitP90S) + ",\"wait_mean_s\":" + num(f.waitMeanS) +
       ",\"arrivals\":" + std::to_string(f.arrivals) + ",\"arrival_median_s\":" + num(f.arrivalMedianS) +
       ",\"arrival_p90_s\":" + num(f.arrivalP90S) + ",\"rate_Bps\":" + num(f.rateBps) +
       ",\"rate_ratio\":" + num(f.rateRatio) + ",\"rate_bytes\":" + num(f.rateBytes) +
       ",\"rate_wire\":" + (f.rateWire ? "1" : "0") + ",\"stall_share\":" + num(f.stallShare) + "}";
  return o;
}

std::string summariesToJson(const std::vector<PeerSummary>& all) {
  std::string o = "[";
  for (size_t i = 0; i < all.size(); i++) o += (i ? ",\n" : "") + toJson(all[i]);
  return o + "]";
}

bool summariesFromJson(const std::string& text, std::vector<PeerSummary>* out, std::string* why) {
  std::string err;
  if (text.size() > kMaxSummaryText) return (*why = "summaries larger than " + std::to_string(kMaxSummaryText) +
                                             " bytes"), false;
  json::Value v;
  if (!json::parse(text, v, err)) return (*why = err), false;
  if (!v.isArray()) return (*why = "summaries are not an array"), false;
  if (v.arr.size() > kMaxSummaries) return (*why = "more than " + std::to_string(kMaxSummaries) + " summaries"), false;
  std::vector<PeerSummary> got;
  got.reserve(v.arr.size());
  for (const json::Value& e : v.arr) {
    PeerSummary s;
    if (!fromObject(e, &s, why)) return false;
    got.push_back(std::move(s));
  }
  out->insert(out->end(), got.begin(), got.end());
  return true;
}

}  // namespace icn::diagnose
