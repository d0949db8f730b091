// Root cause of a hang from the reports of a communicator's processes: the wait-for graph (rank -> the rank it
// waits on, one edge per waited peer) and its root, in this order of evidence:
//   MissingProcess  a rank that others wait on and whose process did not report (or only long before the others):
//                   stopped (SIGSTOP), dead, or unable to write; the prime suspect;
//   IdleRank        a rank that reported, waits on no peer, and is waited on: alive but outside the network
//                   (computing, blocked in host code, or in another collective than its peers);
//   StuckLink       no rank is idle; in a group of ranks that wait only among themselves, a send and its receive
//                   wait on each other: the bytes stopped on that link (or its clear-to-send never came);
//   Cycle           such a group with no transfer in flight between its ranks: each waits to receive from (or to
//                   send to) the next, the mark of mismatched calls (order, count or collective);
//   None            no rank waits on the network.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diagnose/hang_report.h"

namespace icn::diagnose {

enum class RootKind { None, MissingProcess, IdleRank, StuckLink, Cycle };
const char* rootKindName(RootKind k);

struct HangAnalysis {
  uint64_t commId = 0;
  RootKind kind = RootKind::None;
  std::vector<int> roots;        // the ranks named (MissingProcess, IdleRank), or the cycle's ranks in order
  int linkFrom = -1, linkTo = -1;  // StuckLink: the data's direction
  std::vector<int> missing;      // ranks with no (fresh) report, waited on or not
  std::vector<int> chain;        // the longest chain of waits that ends at the root
  int waitingOnRoot = 0;         // ranks that wait on the root, directly or through others
  int reporting = 0, nranks = 0;
  std::string summary;           // one paragraph
  std::vector<std::string> evidence;
};

// One analysis per communicator that has a wait, most waiting ranks first. A report older than the newest by more
// than staleS (default: twice the largest report_after_s, at least 60 s) counts as missing; a report whose
// process resumed counts as one that waits on no one.
std::vector<HangAnalysis> analyzeHang(const std::vector<ProcessReport>& reports, double staleS = 0);

std::string toJson(const HangAnalysis& a);

}  // namespace icn::diagnose
