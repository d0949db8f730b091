// The diagnosis as a process runs it: a tick, about once a second from a background thread (never the data path),
// that ends a straggler period every ICN_STRAGGLER_REPORT_S (summaries of the process's connections, the
// detector over them and over the summaries other processes sent, INFO lines when a finding is raised or cleared)
// and watches for a hang: once no connection made progress for ICN_HANG_REPORT_S it writes the process's hang
// report (and rewrites it every as many seconds while the stall lasts and something is pending; once more, marked
// resumed, when progress comes back). A leader fed the other processes' reports writes the merged file and logs
// the root cause.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "diagnose/hang_graph.h"
#include "diagnose/hang_report.h"
#include "diagnose/straggler.h"
#include "diagnose/summary.h"

namespace icn::diagnose {

struct Settings {
  double hangReportS = 20;       // 0: no hang reports
  double stragglerPeriodS = 10;  // 0: no straggler check (the hooks still measure)
  std::string reportDir;         // empty: the per-user runtime directory
  DetectorConfig detector;
};
// ICN_HANG_REPORT_S, ICN_HANG_REPORT_DIR, ICN_STRAGGLER_REPORT_S, ICN_STRAGGLER_LATE_US, clamped to their bounds.
Settings settingsFromParams();

class Diagnoser {
 public:
  explicit Diagnoser(Settings s);
  const Settings& settings() const { return settings_; }

  void tick(uint64_t nowNs);
  // Time the process was not running when one of its threads should have (stopped, or starved of CPU), as the
  // tick thread measures it; each period's share of it goes into the process's summaries (stallShare).
  void noteStall(uint64_t ns) { stalledNs_.fetch_add(ns, std::memory_order_relaxed); }
  uint64_t stalledNs() const { return stalledNs_.load(std::memory_order_relaxed); }

  // Straggler check. The agreement leader hands in what its followers sent (summariesFromJson on their text);
  // they join the next period's check, then are dropped (a peer's newer summary replaces an older one not yet
  // checked). A follower sends localSummaries(commId) once a period: periodsEnded() tells when one ended.
  void addRemoteSummaries(std::vector<PeerSummary> remote);
  std::string localSummariesJson() const;
  std::vector<PeerSummary> localSummaries(uint64_t commId) const;  // only that communicator's
  uint64_t periodsEnded() const;
  uint64_t remoteSummariesTaken() const;  // summaries other processes handed in so far
  std::vector<Finding> activeFindings() const;
  std::string prometheusLines(const std::string& node) const;
  std::string heatmapJson() const;

  // Hang reports. A follower sends its current report (false when it has none: no stall) to the leader, which
  // hands it to addRemoteReport; the next tick merges, analyses and writes icn-hang-merged-<commId>.json.
  bool currentReport(ProcessReport* out) const;
  // The latest report written (stalled, or the resumed one after it) and its number, counting from 1 (0: none
  // yet, *out untouched): a follower sends each new one to the leader.
  uint64_t latestReport(ProcessReport* out) const;
  void addRemoteReport(ProcessReport report);
  std::vector<HangAnalysis> lastAnalysis() const;
  std::string reportDir() const;  // where reports are written ("" when no directory could be made)

  // Builds the process's report from its open connections (for tests and for the tick).
  static ProcessReport buildReport(uint64_t nowNs, double noProgressS, double reportAfterS);

 private:
  void stragglerTick(uint64_t nowNs);
  void hangTick(uint64_t nowNs);
  void mergeTick(uint64_t nowNs);
  void writeReport(const ProcessReport& r);

  const Settings settings_;
  mutable std::mutex mu_;
  StragglerDetector detector_;
  uint64_t nextPeriodNs_ = 0;
  std::atomic<uint64_t> stalledNs_{0};
  uint64_t periodStartNs_ = 0, periodStalledNs_ = 0;
  std::vector<PeerSummary> local_, remote_;
  uint64_t periods_ = 0, remoteTaken_ = 0;
  std::vector<Finding> active_;
  // hang watch
  bool stalled_ = false;
  uint64_t stallProgressNs_ = 0, lastWriteNs_ = 0;
  bool haveReport_ = false, reportedWaits_ = false;
  ProcessReport report_;
  uint64_t reportSeq_ = 0;
  std::map<std::pair<std::string, int>, ProcessReport> remoteReports_;
  bool remoteChanged_ = false;
  std::vector<HangAnalysis> analysis_;
  mutable std::string dir_;
  mutable bool dirTried_ = false;
};

// The process's diagnoser, made from the parameters at first use.
Diagnoser& diagnoser();

}  // namespace icn::diagnose
