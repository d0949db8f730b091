// The straggler report in the two machine-read forms: Prometheus text lines (appended to ICN_PROM_DIR's file by
// the telemetry writer) and a JSON object for the heatmap snapshot (its "diagnose" member).
#pragma once
#include <string>
#include <vector>

#include "diagnose/straggler.h"
#include "diagnose/summary.h"

namespace icn::diagnose {

// Per peer (the process's own summaries of the last period):
//   icn_peer_late_seconds{node,comm_id,rank,peer_rank,direction,quantile="0.5"|"0.9"}   head-of-line waits
//   icn_peer_arrival_late_seconds{...,quantile}                                          waits of idle posts
//   icn_peer_messages{node,comm_id,rank,peer_rank,direction}                             waits measured
//   icn_peer_rate_bytes_per_second{...}, icn_peer_rate_ratio{...}                         recent rate, / history
// Per process: icn_process_stall_share{node}                                             not running, of the period
// Per active finding (the leader's, or any process that ran the check):
//   icn_straggler_late_seconds{node,comm_id,rank,host,direction}                         its median lateness
//   icn_slow_link_rate_ratio{node,comm_id,rank,peer_rank}                                 share of the others' rate
// Each family has its HELP and TYPE lines; a family with no sample is left out.
std::string prometheusLines(const std::vector<PeerSummary>& peers, const std::vector<Finding>& active,
                            const std::string& node);

// {"period_s":F,"peers":[<summary>...],"findings":[{"kind":"late_rank"|"slow_link",...,"text":"..."}]}
std::string heatmapJson(const std::vector<PeerSummary>& peers, const std::vector<Finding>& active, double periodS);
std::string findingJson(const Finding& f, const std::vector<Finding>& all);

}  // namespace icn::diagnose
