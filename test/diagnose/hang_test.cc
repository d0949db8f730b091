// Hang reports: the JSON round trip and its bounds, and the root of the wait-for graph in each shape a hang takes
// (a chain, a star, a cycle through a stuck link, a cycle of mismatched calls, a process that did not report).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "core/json.h"
#include "diagnose/hang_graph.h"
#include "diagnose/hang_report.h"

using namespace icn::diagnose;

namespace {

constexpr uint64_t kComm = 0x5eed;

// One process per rank, on host h<rank>.
struct Job {
  std::vector<ProcessReport> reports;
  int nranks;
  explicit Job(int n, const std::vector<int>& silent = {}) : nranks(n) {
    for (int r = 0; r < n; r++) {
      if (std::find(silent.begin(), silent.end(), r) != silent.end()) continue;
      ProcessReport p;
      p.host = "h" + std::to_string(r);
      p.pid = 1000 + r;
      p.timeUnixMs = 1700000000000;
      p.noProgressS = 25;
      p.reportAfterS = 20;
      p.ranks.push_back(RankEntry{kComm, r, n, "10.0.0." + std::to_string(r + 1)});
      reports.push_back(p);
    }
  }
  ProcessReport& of(int rank) {
    for (ProcessReport& p : reports)
      if (p.ranks[0].rank == rank) return p;
    throw std::runtime_error("no such rank");
  }
  // rank waits on peer.
  Job& wait(int rank, int peer, Dir d, uint64_t bytes = 1 << 20, uint64_t done = 0, bool ready = false) {
    WaitEntry w;
    w.commId = kComm;
    w.rank = rank;
    w.peerRank = peer;
    w.dir = d;
    w.peerHost = "h" + std::to_string(peer);
    w.peerAddr = "10.0.0." + std::to_string(peer + 1) + ":4000";
    w.tag = 7;
    w.bytes = bytes;
    w.bytesDone = done;
    w.ready = ready;
    w.postedS = 24.5;
    w.progressS = 24;
    of(rank).waits.push_back(w);
    return *this;
  }
};

HangAnalysis only(const std::vector<ProcessReport>& r) {
  std::vector<HangAnalysis> a = analyzeHang(r);
  EXPECT_EQ(a.size(), 1u);
  return a.empty() ? HangAnalysis{} : a[0];
}

}  // namespace

TEST(HangGraph, ChainEndsAtTheRankThatWaitsOnNoOne) {
  Job j(5);
  j.wait(0, 1, Dir::Recv).wait(1, 2, Dir::Recv).wait(2, 3, Dir::Send).wait(4, 3, Dir::Recv);
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::IdleRank);
  EXPECT_EQ(a.roots, std::vector<int>{3});
  EXPECT_EQ(a.chain, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(a.waitingOnRoot, 4);
  EXPECT_TRUE(a.missing.empty());
  EXPECT_NE(a.summary.find("Rank 3 on h3 (10.0.0.4) waits on no peer while 4 of 5 reporting ranks wait on it"),
            std::string::npos)
      << a.summary;
  EXPECT_NE(a.summary.find("(0 -> 1 -> 2 -> 3)"), std::string::npos) << a.summary;
}

TEST(HangGraph, StarNamesItsCentre) {
  Job j(6);
  for (int r : {0, 1, 2, 4, 5}) j.wait(r, 3, r % 2 ? Dir::Recv : Dir::Send);
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::IdleRank);
  EXPECT_EQ(a.roots, std::vector<int>{3});
  EXPECT_EQ(a.waitingOnRoot, 5);
}

// Ranks 1 and 2 wait on each other over a transfer in flight with no progress: the link 1 -> 2 is stuck, and
// everyone else waits behind it.
TEST(HangGraph, CycleThroughAStuckLinkNamesTheLink) {
  Job j(4);
  j.wait(1, 2, Dir::Send, 4 << 20, 3 << 19, true).wait(2, 1, Dir::Recv, 4 << 20, 3 << 19, true);
  j.wait(0, 1, Dir::Recv).wait(3, 2, Dir::Send);
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::StuckLink);
  EXPECT_EQ(a.linkFrom, 1);
  EXPECT_EQ(a.linkTo, 2);
  EXPECT_EQ(a.waitingOnRoot, 2);
  EXPECT_NE(a.summary.find("The link rank 1 on h1 (10.0.0.2) -> rank 2 on h2 (10.0.0.3) stopped moving bytes"),
            std::string::npos)
      << a.summary;
  EXPECT_NE(a.summary.find("1.5 MiB through"), std::string::npos) << a.summary;
  ASSERT_GE(a.evidence.size(), 2u);
  EXPECT_NE(a.evidence[0].find("rank 1 on h1 (10.0.0.2) waits to send to rank 2: tag 7, 1.5 MiB of 4.0 MiB, "
                               "clear-to-send received"),
            std::string::npos)
      << a.evidence[0];
}

// Every rank waits to receive from the next and none sends: mismatched calls, no link to blame.
TEST(HangGraph, CycleOfReceivesIsMismatchedCalls) {
  Job j(3);
  j.wait(0, 1, Dir::Recv).wait(1, 2, Dir::Recv).wait(2, 0, Dir::Recv);
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::Cycle);
  EXPECT_EQ(a.roots, (std::vector<int>{0, 1, 2}));
  EXPECT_NE(a.summary.find("Ranks 0 -> 1 -> 2 -> 0 wait on each other in a cycle"), std::string::npos) << a.summary;
}

// Rank 2's process was stopped: it wrote no report; its peers wait on it and name it, host and address included.
TEST(HangGraph, MissingProcessIsThePrimeSuspect) {
  Job j(4, {2});
  j.wait(1, 2, Dir::Recv).wait(3, 2, Dir::Send).wait(0, 1, Dir::Recv);
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::MissingProcess);
  EXPECT_EQ(a.roots, std::vector<int>{2});
  EXPECT_EQ(a.missing, std::vector<int>{2});
  EXPECT_EQ(a.chain, (std::vector<int>{0, 1, 2}));
  EXPECT_NE(a.summary.find("Rank 2 on h2 (10.0.0.3) did not report"), std::string::npos) << a.summary;
  EXPECT_NE(a.summary.find("2 ranks wait on it directly (1 and 3)"), std::string::npos) << a.summary;
}

// A missing process comes before an idle rank; one that nobody waits on is only mentioned.
TEST(HangGraph, MissingRanksNobodyWaitsOnAreMentionedNotBlamed) {
  Job j(5, {4});
  j.wait(0, 1, Dir::Recv).wait(2, 1, Dir::Recv);
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::IdleRank);
  EXPECT_EQ(a.roots, std::vector<int>{1});
  EXPECT_EQ(a.missing, std::vector<int>{4});
  EXPECT_EQ(a.evidence.back(), "no report from rank 4 (no rank waits on it)");
}

// A report from long before the others' (an earlier stall) does not vouch for its process now.
TEST(HangGraph, StaleReportCountsAsMissing) {
  Job j(3);
  j.wait(0, 1, Dir::Recv).wait(2, 1, Dir::Recv);
  j.of(1).timeUnixMs -= 300000;
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::MissingProcess);
  EXPECT_EQ(a.roots, std::vector<int>{1});
  // The same report, newer than the staleness bound, makes rank 1 an idle rank.
  j.of(1).timeUnixMs += 290000;
  EXPECT_EQ(only(j.reports).kind, RootKind::IdleRank);
}

// A process stopped right after it resumed from an earlier stall: its newest report (resumed, nothing pending)
// predates this stall, and the others had time to report on it: it does not vouch for itself.
TEST(HangGraph, ReportFromBeforeTheStallCountsAsMissingOnceTheOthersReported) {
  Job j(3);
  j.wait(0, 1, Dir::Recv).wait(2, 1, Dir::Recv);  // they stopped moving 25 s ago and report after 20 s
  j.of(1).timeUnixMs -= 30000;
  j.of(1).stalled = false;
  HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::MissingProcess);
  EXPECT_EQ(a.roots, std::vector<int>{1});
  // While a live process could still be about to report on the stall, its report stands.
  for (ProcessReport& p : j.reports) p.noProgressS = 21;
  a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::IdleRank);
  EXPECT_EQ(a.roots, std::vector<int>{1});
}

// A hang of a large job: the analysis walks a 5000-rank cycle and a 5000-rank chain without recursion, and its
// texts stay a paragraph.
TEST(HangGraph, LongCycleAndLongChainStayBounded) {
  const int n = 5000;
  Job cycle(n);
  for (int r = 0; r < n; r++) cycle.wait(r, (r + 1) % n, Dir::Recv);
  HangAnalysis a = only(cycle.reports);
  EXPECT_EQ(a.kind, RootKind::Cycle);
  EXPECT_EQ(a.roots.size(), static_cast<size_t>(n));
  EXPECT_NE(a.summary.find("Ranks 0 -> 1 -> 2 -> 3 -> ... -> 4997 -> 4998 -> 4999 -> 0 (5000 ranks)"),
            std::string::npos)
      << a.summary.substr(0, 300);
  EXPECT_LT(a.summary.size(), 1000u);
  EXPECT_LE(a.evidence.size(), 33u);
  Job chain(n);
  for (int r = 0; r + 1 < n; r++) chain.wait(r, r + 1, Dir::Recv);
  a = only(chain.reports);
  EXPECT_EQ(a.kind, RootKind::IdleRank);
  EXPECT_EQ(a.roots, std::vector<int>{n - 1});
  EXPECT_EQ(a.chain.size(), static_cast<size_t>(n));
  EXPECT_EQ(a.waitingOnRoot, n - 1);
  EXPECT_LT(a.summary.size(), 1000u);
  EXPECT_EQ(a.evidence.back(), "... (more waits left out)");
}

TEST(HangGraph, NoWaitsNoCulprit) {
  Job j(3);
  EXPECT_TRUE(analyzeHang(j.reports).empty());
  j.wait(0, 1, Dir::Recv);
  j.of(0).stalled = false;  // it resumed: its old waits no longer stand
  const HangAnalysis a = only(j.reports);
  EXPECT_EQ(a.kind, RootKind::None);
}

TEST(HangReport, RoundTripKeepsEveryField) {
  Job j(2);
  j.wait(0, 1, Dir::Send, 123456789, 1000, true);
  ProcessReport& p = j.of(0);
  p.host = "host \"zero\"";
  const std::string text = toJson(p);
  ProcessReport back;
  std::string why;
  ASSERT_TRUE(reportFromJson(text, &back, &why)) << why << "\n" << text;
  EXPECT_EQ(back.host, p.host);
  EXPECT_EQ(back.pid, p.pid);
  EXPECT_EQ(back.timeUnixMs, p.timeUnixMs);
  EXPECT_TRUE(back.stalled);
  EXPECT_EQ(back.noProgressS, 25);
  EXPECT_EQ(back.reportAfterS, 20);
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].commId, kComm);
  EXPECT_EQ(back.ranks[0].nranks, 2);
  EXPECT_EQ(back.ranks[0].addr, "10.0.0.1");
  ASSERT_EQ(back.waits.size(), 1u);
  const WaitEntry& w = back.waits[0];
  EXPECT_EQ(w.commId, kComm);
  EXPECT_EQ(w.peerRank, 1);
  EXPECT_EQ(w.dir, Dir::Send);
  EXPECT_EQ(w.peerAddr, "10.0.0.2:4000");
  EXPECT_EQ(w.tag, 7);
  EXPECT_EQ(w.bytes, 123456789u);
  EXPECT_EQ(w.bytesDone, 1000u);
  EXPECT_TRUE(w.ready);
  EXPECT_EQ(w.postedS, 24.5);
  EXPECT_EQ(toJson(back), text);
}

TEST(HangReport, MergedFileCarriesTheReportsAndTheAnalysis) {
  Job j(3, {2});
  j.wait(0, 2, Dir::Recv).wait(1, 2, Dir::Recv);
  const std::vector<HangAnalysis> a = analyzeHang(j.reports);
  ASSERT_EQ(a.size(), 1u);
  const std::string merged = mergedJson(j.reports, {toJson(a[0])}, 1700000001000);
  std::vector<ProcessReport> back;
  std::string why;
  ASSERT_TRUE(reportsFromJson(merged, &back, &why)) << why;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(analyzeHang(back)[0].roots, std::vector<int>{2});
  icn::json::Value v;
  ASSERT_TRUE(icn::json::parse(merged, v, why));
  EXPECT_EQ(v.get("analysis")->arr.at(0).string("kind"), "missing_process");
}

TEST(HangReport, MalformedOrOversizedReportsAreRefused) {
  Job j(2);
  j.wait(0, 1, Dir::Recv);
  const std::string good = toJson(j.of(0));
  auto refused = [](std::string text) {
    std::vector<ProcessReport> out;
    std::string why;
    const bool ok = reportsFromJson(text, &out, &why);
    return !ok && out.empty() && !why.empty();
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_TRUE(refused(edit("\"icn-hang\"", "\"other\"")));
  EXPECT_TRUE(refused(edit("\"version\":1", "\"version\":2")));
  EXPECT_TRUE(refused(edit("\"dir\":\"recv\"", "\"dir\":\"up\"")));
  EXPECT_TRUE(refused(edit("\"posted_s\":24.5", "\"posted_s\":-1")));
  EXPECT_TRUE(refused(edit("\"peerRank\":1", "\"peerRank\":1.5")));
  EXPECT_TRUE(refused(edit("\"commId\":\"0x5eed\"", "\"commId\":\"5eed\"")));
  EXPECT_TRUE(refused(edit("\"state\":\"stalled\"", "\"state\":\"fine\"")));
  EXPECT_TRUE(refused(edit("\"host\":\"h0\"", "\"host\":\"" + std::string(300, 'x') + "\"")));
  EXPECT_TRUE(refused(good.substr(0, good.size() / 2)));
  EXPECT_TRUE(refused(std::string(kMaxReportBytes + 1, ' ')));
  std::string many = "{\"schema\":\"icn-hang\",\"version\":1,\"host\":\"h\",\"pid\":1,\"time_unix_ms\":1,"
                     "\"state\":\"stalled\",\"no_progress_s\":1,\"ranks\":[],\"waits\":[";
  for (size_t i = 0; i <= kMaxWaitsPerReport; i++) many += (i ? ",{}" : "{}");
  EXPECT_TRUE(refused(many + "]}"));
}

TEST(HangReport, FileNames) {
  EXPECT_EQ(reportFileName("node-1.cluster", 42), "icn-hang-node-1.cluster-42.json");
  EXPECT_EQ(reportFileName("a/../b", 1), "icn-hang-a_.._b-1.json");
  EXPECT_EQ(mergedFileName(0xabc), "icn-hang-merged-0xabc.json");
  EXPECT_TRUE(isReportFileName("icn-hang-h-1.json"));
  EXPECT_FALSE(isReportFileName("icn-hang-h-1.json.tmp"));
  EXPECT_FALSE(isReportFileName("heatmap-1.json"));
}
