// icn-hang: the root cause of a hang from the reports a job's processes wrote (ICN_HANG_REPORT_S,
// ICN_HANG_REPORT_DIR), in one paragraph per communicator, with the evidence under it.
//   icn-hang [--json] [--comm 0xID] [--stale-s S] PATH...
// PATH: a report (a process's icn-hang-<host>-<pid>.json or a leader's icn-hang-merged-<commId>.json) or a
// directory holding them, directly or one level down (one folder per host copied together).
// Exit status: 0 a root cause was named, 1 no rank waits on the network, 2 bad usage or no report read.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "diagnose/hang_graph.h"
#include "diagnose/hang_report.h"
#include "diagnose/summary.h"

namespace fs = std::filesystem;
using namespace icn::diagnose;

namespace {

constexpr size_t kMaxFiles = 100000;

void usage() {
  fprintf(stderr,
          "usage: icn-hang [--json] [--comm 0xID] [--stale-s S] PATH...\n"
          "  PATH: an icn-hang-*.json report or a directory of them (or of one folder per host)\n");
}

void collect(const fs::path& p, int depth, std::vector<fs::path>* files) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    files->push_back(p);
    return;
  }
  if (!fs::is_directory(p, ec) || depth > 1) return;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end && entries.size() < kMaxFiles; it.increment(ec))
    entries.push_back(it->path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& e : entries) {
    if (fs::is_directory(e, ec)) collect(e, depth + 1, files);
    else if (isReportFileName(e.filename().string())) files->push_back(e);
  }
}

// Paragraph text folded at 100 columns.
void printWrapped(const std::string& text) {
  size_t col = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    const std::string word = text.substr(i, j - i);
    if (col && col + 1 + word.size() > 100) {
      printf("\n");
      col = 0;
    } else if (col) {
      printf(" ");
      col++;
    }
    printf("%s", word.c_str());
    col += word.size();
    i = j + 1;
  }
  printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool asJson = false;
  double staleS = 0;
  uint64_t onlyComm = 0;
  bool commGiven = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--json") {
      asJson = true;
    } else if (a == "--comm" && i + 1 < argc) {
      if (!parseCommId(argv[++i], &onlyComm)) return usage(), 2;
      commGiven = true;
    } else if (a == "--stale-s" && i + 1 < argc) {
      staleS = strtod(argv[++i], nullptr);
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(), 2;
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) return usage(), 2;
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    const size_t before = files.size();
    collect(p, 0, &files);
    if (files.size() == before) fprintf(stderr, "icn-hang: %s: no icn-hang-*.json report there\n", p.c_str());
  }
  std::vector<ProcessReport> reports;
  for (const fs::path& f : files) {
    std::string why;
    if (!readReports(f.string(), &reports, &why))
      fprintf(stderr, "icn-hang: %s: %s (skipped)\n", f.c_str(), why.c_str());
  }
  if (reports.empty()) {
    fprintf(stderr, "icn-hang: no report could be read\n");
    return 2;
  }
  std::vector<HangAnalysis> analyses = analyzeHang(reports, staleS);
  if (commGiven)
    analyses.erase(std::remove_if(analyses.begin(), analyses.end(),
                                  [&](const HangAnalysis& a) { return a.commId != onlyComm; }),
                   analyses.end());
  const bool named = std::any_of(analyses.begin(), analyses.end(),
                                 [](const HangAnalysis& a) { return a.kind != RootKind::None; });
  if (asJson) {
    printf("[");
    for (size_t i = 0; i < analyses.size(); i++) printf("%s%s", i ? ",\n" : "\n", toJson(analyses[i]).c_str());
    printf("]\n");
    return named ? 0 : 1;
  }
  printf("%zu reports read from %zu files.\n", reports.size(), files.size());
  if (analyses.empty()) printf("No rank waits on the network in these reports.\n");
  for (const HangAnalysis& a : analyses) {
    printf("\ncomm %s (%d of %d ranks reported): %s\n", commIdText(a.commId).c_str(), a.reporting,
           std::max(a.nranks, a.reporting), rootKindName(a.kind));
    printWrapped(a.summary);
    if (!a.evidence.empty()) printf("Evidence:\n");
    for (const std::string& e : a.evidence) printf("  - %s\n", e.c_str());
  }
  return named ? 0 : 1;
}
