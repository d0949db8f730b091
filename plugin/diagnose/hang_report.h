// Hang reports: what each process waits for once its network made no progress for ICN_HANG_REPORT_S, as JSON files
// that a leader merges and icn-hang reads. The schema is documented in docs/readme/diagnose.md; readers bound every
// count and string, since reports may come from other hosts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diagnose/link_monitor.h"

namespace icn::diagnose {

constexpr int kHangSchemaVersion = 1;
constexpr size_t kMaxReportBytes = 16u << 20;
constexpr size_t kMaxWaitsPerReport = 65536;
constexpr size_t kMaxReportsMerged = 65536;

// One operation this process waits on.
struct WaitEntry {
  uint64_t commId = 0;
  int rank = -1;           // ours
  int peerRank = -1;       // the rank it waits on
  Dir dir = Dir::Recv;     // Recv: waits for the peer's bytes; Send: waits for the peer to take them
  std::string peerHost, peerAddr;
  int tag = 0;
  uint64_t bytes = 0, bytesDone = 0;
  bool ready = false;      // Recv: a first byte came; Send: the peer's clear-to-send came
  double postedS = 0;      // seconds since posted
  double progressS = 0;    // seconds since a byte of it last moved (since posted when none did)
};

// A communicator rank this process holds.
struct RankEntry {
  uint64_t commId = 0;
  int rank = -1;
  int nranks = 0;          // 0 when unknown
  std::string addr;        // our address on its connections
};

struct ProcessReport {
  std::string host;
  int pid = 0;
  int64_t timeUnixMs = 0;
  bool stalled = true;     // false: progress resumed after the report ("state":"resumed")
  double noProgressS = 0;  // since this process's last network progress
  double reportAfterS = 0; // ICN_HANG_REPORT_S in effect
  std::vector<RankEntry> ranks;
  std::vector<WaitEntry> waits;
};

std::string toJson(const ProcessReport& r);
// False with *why when the text is no such report (or exceeds a bound).
bool reportFromJson(const std::string& text, ProcessReport* out, std::string* why);

// The leader's file: every process report it gathered, and its analysis (already rendered as JSON objects).
std::string mergedJson(const std::vector<ProcessReport>& reports, const std::vector<std::string>& analyses,
                       int64_t timeUnixMs);
// Reads a process report or a merged one (its process reports) from text; appends to *out.
bool reportsFromJson(const std::string& text, std::vector<ProcessReport>* out, std::string* why);
// Reads a file (at most kMaxReportBytes) with reportsFromJson.
bool readReports(const std::string& path, std::vector<ProcessReport>* out, std::string* why);

// File names: icn-hang-<host>-<pid>.json, icn-hang-merged-<commId>.json.
std::string reportFileName(const std::string& host, int pid);
std::string mergedFileName(uint64_t commId);
bool isReportFileName(const std::string& name);

}  // namespace icn::diagnose
