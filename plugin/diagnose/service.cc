#include "diagnose/service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <tuple>

#include "core/log.h"
#include "core/params.h"
#include "core/private_file.h"
#include "diagnose/registry.h"
#include "diagnose/straggler_export.h"

namespace icn::diagnose {
namespace {

constexpr size_t kMaxEvidenceLogged = 8;

int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string hostName() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0 || !h[0]) return "unknown";
  return h;
}

double seconds(uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

using PeerKey = std::tuple<uint64_t, int, int, int>;
PeerKey keyOf(const PeerSummary& s) { return {s.commId, s.rank, s.peerRank, static_cast<int>(s.dir)}; }

}  // namespace

Settings settingsFromParams() {
  using params::Id;
  Settings s;
  s.hangReportS = static_cast<double>(params::getInt(Id::HangReportS));
  s.reportDir = params::getString(Id::HangReportDir);
  s.stragglerPeriodS = static_cast<double>(params::getInt(Id::StragglerReportS));
  s.detector.lateFloorS = static_cast<double>(params::getInt(Id::StragglerLateUs)) * 1e-6;
  s.detector.minTimedGapS = static_cast<double>(params::getInt(Id::StragglerLinkGapUs)) * 1e-6;
  return s;
}

Diagnoser::Diagnoser(Settings s) : settings_(std::move(s)), detector_(settings_.detector) {}

void Diagnoser::tick(uint64_t nowNs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (settings_.stragglerPeriodS > 0) stragglerTick(nowNs);
  if (settings_.hangReportS > 0) hangTick(nowNs);
  mergeTick(nowNs);
}

void Diagnoser::stragglerTick(uint64_t nowNs) {
  const uint64_t period = static_cast<uint64_t>(settings_.stragglerPeriodS * 1e9);
  const uint64_t stalled = stalledNs_.load(std::memory_order_relaxed);
  if (nextPeriodNs_ == 0) {  // the first period starts now
    summarize(links::all());
    nextPeriodNs_ = nowNs + period;
    periodStartNs_ = nowNs;
    periodStalledNs_ = stalled;
    return;
  }
  if (nowNs < nextPeriodNs_) return;
  nextPeriodNs_ = nowNs + period;
  local_ = summarize(links::all());
  const double share = nowNs > periodStartNs_ ? std::min(1.0, static_cast<double>(stalled - periodStalledNs_) /
                                                                  static_cast<double>(nowNs - periodStartNs_))
                                              : 0;
  for (PeerSummary& s : local_) s.fig.stallShare = share;
  periodStartNs_ = nowNs;
  periodStalledNs_ = stalled;
  ++periods_;
  std::vector<PeerSummary> all = local_;
  std::set<PeerKey> have;
  for (const PeerSummary& s : local_) have.insert(keyOf(s));
  for (PeerSummary& s : remote_)
    if (have.insert(keyOf(s)).second) all.push_back(std::move(s));
  remote_.clear();
  StragglerDetector::Update u = detector_.evaluate(all);
  for (const Finding& f : u.raised) ICN_INFO(subsys::Net, "straggler: %s", describe(f, u.active).c_str());
  for (const Finding& f : u.cleared) ICN_INFO(subsys::Net, "straggler: %s", describeCleared(f).c_str());
  active_ = std::move(u.active);
}

void Diagnoser::addRemoteSummaries(std::vector<PeerSummary> remote) {
  std::lock_guard<std::mutex> lock(mu_);
  remoteTaken_ += remote.size();
  // Periods of other processes end at other times: two of one peer's may come before the next check here, and
  // the newer one is what that check should see.
  std::map<PeerKey, size_t> at;
  for (size_t i = 0; i < remote_.size(); ++i) at[keyOf(remote_[i])] = i;
  for (PeerSummary& s : remote) {
    auto it = at.find(keyOf(s));
    if (it != at.end()) {
      remote_[it->second] = std::move(s);
    } else if (remote_.size() < kMaxSummaries * 4) {
      at.emplace(keyOf(s), remote_.size());
      remote_.push_back(std::move(s));
    }
  }
}

std::string Diagnoser::localSummariesJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summariesToJson(local_);
}

std::vector<PeerSummary> Diagnoser::localSummaries(uint64_t commId) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PeerSummary> mine;
  for (const PeerSummary& s : local_)
    if (s.commId == commId) mine.push_back(s);
  return mine;
}

uint64_t Diagnoser::periodsEnded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return periods_;
}

uint64_t Diagnoser::remoteSummariesTaken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return remoteTaken_;
}

std::vector<Finding> Diagnoser::activeFindings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

std::string Diagnoser::prometheusLines(const std::string& node) const {
  std::lock_guard<std::mutex> lock(mu_);
  return diagnose::prometheusLines(local_, active_, node);
}

std::string Diagnoser::heatmapJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  return diagnose::heatmapJson(local_, active_, settings_.stragglerPeriodS);
}

ProcessReport Diagnoser::buildReport(uint64_t nowNs, double noProgressS, double reportAfterS) {
  ProcessReport r;
  r.host = hostName();
  r.pid = static_cast<int>(getpid());
  r.timeUnixMs = unixMs();
  r.noProgressS = noProgressS;
  r.reportAfterS = reportAfterS;
  r.ranks = links::ranks();
  for (const auto& l : links::all()) {
    const LinkInfo& i = l->info();
    for (const PendingOp& op : l->pendingOps()) {
      if (r.waits.size() >= kMaxWaitsPerReport) break;
      WaitEntry w;
      w.commId = i.commId;
      w.rank = i.rank;
      w.peerRank = i.peerRank;
      w.dir = i.dir;
      w.peerHost = i.peerHost;
      w.peerAddr = i.peerAddr;
      w.tag = op.tag;
      w.bytes = op.bytes;
      w.bytesDone = op.bytesDone;
      w.ready = op.readyNs != 0;
      w.postedS = nowNs > op.postedNs ? seconds(nowNs - op.postedNs) : 0;
      const uint64_t moved = std::max({op.postedNs, op.readyNs, op.progressNs});
      w.progressS = nowNs > moved ? seconds(nowNs - moved) : 0;
      r.waits.push_back(std::move(w));
    }
  }
  std::stable_sort(r.waits.begin(), r.waits.end(),
                   [](const WaitEntry& a, const WaitEntry& b) { return a.postedS > b.postedS; });
  return r;
}

void Diagnoser::hangTick(uint64_t nowNs) {
  uint64_t last = 0;
  uint32_t pending = 0;
  for (const auto& l : links::all()) {
    last = std::max({last, l->lastProgressNs(), l->lastPostNs()});
    pending += l->pending();
  }
  if (last == 0) return;  // no network activity yet
  if (stalled_ && last > stallProgressNs_) {
    stalled_ = false;
    if (haveReport_) {
      report_.stalled = false;
      report_.timeUnixMs = unixMs();
      ++reportSeq_;
      writeReport(report_);
      if (reportedWaits_)
        ICN_INFO(subsys::Net, "network progress resumed after %.1f s without", seconds(last - stallProgressNs_));
    }
    haveReport_ = reportedWaits_ = false;
    return;
  }
  const uint64_t after = static_cast<uint64_t>(settings_.hangReportS * 1e9);
  if (nowNs < last + after) return;
  if (stalled_ && (pending == 0 || nowNs < lastWriteNs_ + after)) return;
  const bool first = !stalled_;
  stalled_ = true;
  stallProgressNs_ = last;
  lastWriteNs_ = nowNs;
  report_ = buildReport(nowNs, seconds(nowNs - last), settings_.hangReportS);
  haveReport_ = true;
  ++reportSeq_;
  writeReport(report_);
  if (first && !report_.waits.empty()) {
    reportedWaits_ = true;
    const WaitEntry& w = report_.waits.front();
    // Ranks are known where NCCL's profiler told the plugin; otherwise the peer is named by host and address.
    std::string peer = w.peerRank >= 0 ? "rank " + std::to_string(w.peerRank) : std::string("the peer");
    if (!w.peerHost.empty()) peer += " on " + w.peerHost;
    if (!w.peerAddr.empty()) peer += " (" + w.peerAddr + ")";
    const std::string self = w.rank >= 0 ? "rank " + std::to_string(w.rank) : std::string("this process");
    ICN_WARN(subsys::Net,
             "no network progress for %.1f s with %zu operations pending; the oldest: %s %s %s (tag %d, %llu of "
             "%llu bytes, posted %.1f s ago); hang report in %s",
             report_.noProgressS, report_.waits.size(), self.c_str(),
             w.dir == Dir::Recv ? "waits to receive from" : "waits to send to", peer.c_str(), w.tag,
             static_cast<unsigned long long>(w.bytesDone), static_cast<unsigned long long>(w.bytes), w.postedS,
             reportDir().c_str());
  }
}

bool Diagnoser::currentReport(ProcessReport* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!haveReport_) return false;
  *out = report_;
  return true;
}

uint64_t Diagnoser::latestReport(ProcessReport* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (reportSeq_ > 0) *out = report_;
  return reportSeq_;
}

void Diagnoser::addRemoteReport(ProcessReport report) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_pair(report.host, report.pid);
  if (!remoteReports_.count(key) && remoteReports_.size() >= kMaxReportsMerged) return;
  remoteReports_[key] = std::move(report);
  remoteChanged_ = true;
}

std::vector<HangAnalysis> Diagnoser::lastAnalysis() const {
  std::lock_guard<std::mutex> lock(mu_);
  return analysis_;
}

void Diagnoser::mergeTick(uint64_t nowNs) {
  if (!remoteChanged_) return;
  remoteChanged_ = false;
  std::vector<ProcessReport> reports;
  // The leader's own part: its stall report, else itself as a process that moves (alive, and not to be taken for
  // one that did not report; its pending operations are traffic, not waits).
  reports.push_back(haveReport_ ? report_ : buildReport(nowNs, 0, settings_.hangReportS));
  if (!haveReport_) reports.back().stalled = false;
  for (const auto& [k, r] : remoteReports_) reports.push_back(r);
  // A hang needs a process that stalled with something pending: once every report reads resumed, there is none.
  const bool anyStalled = std::any_of(reports.begin(), reports.end(),
                                      [](const ProcessReport& r) { return r.stalled && !r.waits.empty(); });
  if (!anyStalled) {
    for (const HangAnalysis& a : analysis_)
      if (a.kind != RootKind::None)
        ICN_INFO(subsys::Net, "hang on comm %s: every process that reported moves again", commIdText(a.commId).c_str());
    analysis_.clear();
    return;
  }
  std::vector<HangAnalysis> before = std::move(analysis_);
  analysis_ = analyzeHang(reports);
  const std::string dir = reportDir();
  for (const HangAnalysis& a : analysis_) {
    if (a.kind == RootKind::None) continue;
    if (!dir.empty()) {
      std::string why;
      if (privfile::writeAtomic(dir + "/" + mergedFileName(a.commId), mergedJson(reports, {toJson(a)}, unixMs()),
                                false, &why) != Status::Ok)
        ICN_WARN(subsys::Net, "cannot write the merged hang report in %s: %s", dir.c_str(), why.c_str());
    }
    const bool same = std::any_of(before.begin(), before.end(), [&](const HangAnalysis& b) {
      return b.commId == a.commId && b.kind == a.kind && b.roots == a.roots;
    });
    if (same) continue;
    ICN_WARN(subsys::Net, "hang on comm %s: %s", commIdText(a.commId).c_str(), a.summary.c_str());
    for (size_t i = 0; i < a.evidence.size() && i < kMaxEvidenceLogged; i++)
      ICN_INFO(subsys::Net, "hang on comm %s: %s", commIdText(a.commId).c_str(), a.evidence[i].c_str());
  }
}

std::string Diagnoser::reportDir() const {
  if (dirTried_) return dir_;
  dirTried_ = true;
  std::string why;
  std::string dir = settings_.reportDir;
  const Status st = dir.empty() ? privfile::runtimeDir(&dir, &why) : privfile::ensureDir(dir, &why);
  if (st != Status::Ok) {
    ICN_WARN(subsys::Net, "hang reports are off: %s", why.c_str());
    return dir_ = "";
  }
  return dir_ = dir;
}

void Diagnoser::writeReport(const ProcessReport& r) {
  const std::string dir = reportDir();
  if (dir.empty()) return;
  std::string why;
  if (privfile::writeAtomic(dir + "/" + reportFileName(r.host, r.pid), toJson(r), false, &why) != Status::Ok)
    ICN_WARN(subsys::Net, "cannot write the hang report in %s: %s", dir.c_str(), why.c_str());
}

Diagnoser& diagnoser() {
  static Diagnoser* d = new Diagnoser(settingsFromParams());  // never destroyed: the reporter may run at exit
  return *d;
}

}  // namespace icn::diagnose
