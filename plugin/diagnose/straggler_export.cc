#include "diagnose/straggler_export.h"

#include <cmath>
#include <cstdio>
#include <functional>

#include "core/json.h"

namespace icn::diagnose {
namespace {

std::string num(double v) { return json::number(v, 9); }

void label(std::string& out, const char* name, const std::string& v) {
  if (out.size() > 1) out += ',';
  out += name;
  out += "=\"";
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  out += '"';
}

std::string peerLabels(const PeerSummary& s, const std::string& node) {
  std::string l = "{";
  label(l, "node", node);
  label(l, "comm_id", commIdText(s.commId));
  label(l, "rank", std::to_string(s.rank));
  label(l, "peer_rank", std::to_string(s.peerRank));
  label(l, "direction", dirName(s.dir));
  return l;
}

// One metric family: HELP, TYPE and its samples, or nothing when it has none.
void family(std::string& out, const char* name, const char* help, const std::vector<std::string>& samples) {
  if (samples.empty()) return;
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
  for (const std::string& s : samples) out += s;
}

std::string sample(const char* name, std::string labels, double v) { return name + labels + "} " + num(v) + "\n"; }

}  // namespace

std::string prometheusLines(const std::vector<PeerSummary>& peers, const std::vector<Finding>& active,
                            const std::string& node) {
  std::vector<std::string> late, arrival, count, rate, ratio, straggler, slow, stall;
  if (!peers.empty()) {  // one figure per process, carried in each of its summaries
    std::string l = "{";
    label(l, "node", node);
    stall.push_back(sample("icn_process_stall_share", l, peers.front().fig.stallShare));
  }
  for (const PeerSummary& s : peers) {
    const std::string l = peerLabels(s, node);
    count.push_back(sample("icn_peer_messages", l, s.fig.count));
    if (s.fig.count) {
      late.push_back(sample("icn_peer_late_seconds", l + ",quantile=\"0.5\"", s.fig.waitMedianS));
      late.push_back(sample("icn_peer_late_seconds", l + ",quantile=\"0.9\"", s.fig.waitP90S));
    }
    if (s.fig.arrivals) {
      arrival.push_back(sample("icn_peer_arrival_late_seconds", l + ",quantile=\"0.5\"", s.fig.arrivalMedianS));
      arrival.push_back(sample("icn_peer_arrival_late_seconds", l + ",quantile=\"0.9\"", s.fig.arrivalP90S));
    }
    if (s.fig.rateBps > 0) {
      rate.push_back(sample("icn_peer_rate_bytes_per_second", l, s.fig.rateBps));
      ratio.push_back(sample("icn_peer_rate_ratio", l, s.fig.rateRatio));
    }
  }
  for (const Finding& f : active) {
    std::string l = "{";
    label(l, "node", node);
    label(l, "comm_id", commIdText(f.commId));
    label(l, "rank", std::to_string(f.rank));
    if (f.kind == FindingKind::LateRank) {
      label(l, "host", f.host);
      label(l, "direction", dirName(f.via));
      straggler.push_back(sample("icn_straggler_late_seconds", l, f.lateMedianS));
    } else {
      label(l, "peer_rank", std::to_string(f.peerRank));
      slow.push_back(sample("icn_slow_link_rate_ratio", l, f.groupMedianBps > 0 ? f.rateBps / f.groupMedianBps : 0));
    }
  }
  std::string out;
  family(out, "icn_peer_late_seconds",
         "How long a message waited at the head of the connection for the peer (first byte or clear-to-send), "
         "over the last straggler period.", late);
  family(out, "icn_peer_arrival_late_seconds",
         "How long a message posted on an idle connection waited for the peer: how late the peer came.", arrival);
  family(out, "icn_peer_messages", "Messages whose wait was measured in the last straggler period.", count);
  family(out, "icn_peer_rate_bytes_per_second", "Transfer rate of the connections to the peer over the period (the sockets' delivery where TCP measures it, else messages of 64 KiB or more).", rate);
  family(out, "icn_peer_rate_ratio", "The period's rate over the connections' own longer-term rate.", ratio);
  family(out, "icn_process_stall_share", "Share of the last straggler period the process was not running when its tick thread was due (stopped or starved of CPU).", stall);
  family(out, "icn_straggler_late_seconds", "A rank named late by the straggler check: its median lateness.",
         straggler);
  family(out, "icn_slow_link_rate_ratio", "A link named slow: its rate over the median of comparable links.", slow);
  return out;
}

std::string findingJson(const Finding& f, const std::vector<Finding>& all) {
  std::string o = std::string("{\"kind\":\"") + (f.kind == FindingKind::LateRank ? "late_rank" : "slow_link") +
                  "\",\"commId\":\"" + commIdText(f.commId) + "\",\"rank\":" + std::to_string(f.rank) +
                  ",\"host\":" + json::quote(f.host) + ",\"addr\":" + json::quote(f.addr);
  if (f.kind == FindingKind::LateRank) {
    o += std::string(",\"via\":\"") + dirName(f.via) + "\",\"late_median_s\":" + num(f.lateMedianS) +
         ",\"late_links\":" + std::to_string(f.lateLinks) + ",\"observed_links\":" + std::to_string(f.observedLinks) +
         ",\"imposed_mean_s\":" + num(f.imposedMeanS) + ",\"own_mean_s\":" + num(f.ownMeanS);
  } else {
    o += ",\"peerRank\":" + std::to_string(f.peerRank) + ",\"peerHost\":" + json::quote(f.peerHost) +
         ",\"peerAddr\":" + json::quote(f.peerAddr) + ",\"rate_Bps\":" + num(f.rateBps) +
         ",\"group_median_Bps\":" + num(f.groupMedianBps) + ",\"history_ratio\":" + num(f.historyRatio);
  }
  return o + ",\"periods\":" + std::to_string(f.periods) + ",\"text\":" + json::quote(describe(f, all)) + "}";
}

std::string heatmapJson(const std::vector<PeerSummary>& peers, const std::vector<Finding>& active, double periodS) {
  std::string o = "{\"period_s\":" + num(periodS) + ",\"peers\":" + summariesToJson(peers) + ",\"findings\":[";
  for (size_t i = 0; i < active.size(); i++) o += (i ? "," : "") + findingJson(active[i], active);
  return o + "]}";
}

}  // namespace icn::diagnose
