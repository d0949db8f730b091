// libFuzzer harness: the diagnosis' input from other processes. A follower sends the agreement leader its hang
// reports and straggler summaries as text it chooses (DIAG frames), and icn-hang reads the reports of a whole job
// from a shared directory. The first byte picks the reader, the rest is the text:
//   0  reportsFromJson (a process report or a merged file), as icn-hang reads a file;
//   1  reportFromJson, as the leader reads a follower's report;
//   2  summariesFromJson, as the leader reads a follower's straggler summaries.
// What parses is used as the leader uses it: the hang analysis over the reports with this process's own report
// beside them (fresh and stale cut-offs), the merged file written and read back; the straggler detector over two
// periods of the summaries, which are written and read back.
// Invariants (a broken one aborts, so libFuzzer keeps the input): no crash, exception or sanitizer report; a refusal
// says why; what the leader writes from accepted input reads back whole (same reports, waits and summaries).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/log.h"
#include "diagnose/hang_graph.h"
#include "diagnose/hang_report.h"
#include "diagnose/straggler.h"
#include "diagnose/summary.h"

namespace {
using namespace icn::diagnose;

[[noreturn]] void broken(const char* what, const std::string& detail) {
  fprintf(stderr, "INVARIANT BROKEN: %s: %s\n", what, detail.c_str());
  abort();
}

void quietSink(int, unsigned long, const char*, int, const char*, ...) {}

// This process's own report: one rank of the first communicator the input names, waiting on the next rank.
ProcessReport ownReport(const std::vector<ProcessReport>& others) {
  ProcessReport p;
  p.host = "leader";
  p.pid = 1;
  p.timeUnixMs = 1700000000000;
  p.noProgressS = 25;
  p.reportAfterS = 20;
  uint64_t comm = 0x5eed;
  int nranks = 4;
  for (const ProcessReport& o : others)
    if (!o.ranks.empty()) {
      comm = o.ranks[0].commId;
      nranks = o.ranks[0].nranks;
      break;
    }
  p.ranks.push_back(RankEntry{comm, 0, nranks, "10.0.0.1"});
  WaitEntry w;
  w.commId = comm;
  w.rank = 0;
  w.peerRank = 1;
  w.postedS = 24;
  w.progressS = 24;
  p.waits.push_back(w);
  return p;
}

void useReports(std::vector<ProcessReport> reports) {
  reports.push_back(ownReport(reports));
  std::vector<std::string> rendered;
  for (double staleS : {0.0, 1.0})
    for (const HangAnalysis& a : analyzeHang(reports, staleS)) rendered.push_back(toJson(a));
  const std::string merged = mergedJson(reports, rendered, 1700000000000);
  std::vector<ProcessReport> back;
  std::string why;
  if (!reportsFromJson(merged, &back, &why)) broken("the merged file of accepted reports does not read back", why);
  if (back.size() != reports.size()) broken("the merged file reads back another number of reports", merged);
  for (size_t i = 0; i < back.size(); i++)
    if (back[i].waits.size() != reports[i].waits.size() || back[i].ranks.size() != reports[i].ranks.size())
      broken("a merged report reads back with other waits or ranks", merged);
}

void useSummaries(const std::vector<PeerSummary>& v) {
  StragglerDetector d;
  d.evaluate(v);
  d.evaluate(v);
  const std::string text = summariesToJson(v);
  std::vector<PeerSummary> back;
  std::string why;
  if (!summariesFromJson(text, &back, &why)) broken("accepted summaries do not read back", why);
  if (back.size() != v.size()) broken("summaries read back in another number", text);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::setLogSink(&quietSink);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string why;
  switch (data[0] % 3) {
    case 0: {
      std::vector<ProcessReport> reports;
      if (!reportsFromJson(text, &reports, &why)) {
        if (why.empty()) broken("a refused report file", "no reason given");
        return 0;
      }
      useReports(std::move(reports));
      break;
    }
    case 1: {
      ProcessReport r;
      if (!reportFromJson(text, &r, &why)) {
        if (why.empty()) broken("a refused report", "no reason given");
        return 0;
      }
      useReports({r});
      break;
    }
    default: {
      std::vector<PeerSummary> v;
      if (!summariesFromJson(text, &v, &why)) {
        if (why.empty()) broken("refused summaries", "no reason given");
        return 0;
      }
      useSummaries(v);
      break;
    }
  }
  return 0;
}
