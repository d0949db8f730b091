// The diagnosis's gathering over the agreement's connections (agree/service.h): a follower sends the leader each
// new straggler period's summaries of the communicator and each new hang report of its process; the leader checks
// them against what the follower is (its ranks, its one process) and hands them to its diagnoser, which names late
// ranks and slow links from every process's view and writes the merged hang report.
//
// A follower is untrusted here as everywhere: a message is reassembled up to kMaxDiagText, parsed by the
// diagnosis's bounded readers, must speak only for this communicator and the ranks the follower claimed, and may
// come at most three times a period (a faster sender's extra messages are dropped unread, so a flood costs neither
// memory nor parsing): a summary each period, a hang report and the resumed one after it, each window's phase.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/log.h"
#include "diagnose/service.h"
#include "tuner/agree/service_impl.h"

namespace icn::tuner::agree {
namespace {

constexpr int kDiagPerWindow = 3;

// The window in which a follower's messages of one kind are counted: the period it sends them in.
Clock::duration diagWindow(uint8_t kind) {
  const diagnose::Settings& s = diagnose::diagnoser().settings();
  const double period = kind == kDiagSummaries ? s.stragglerPeriodS : s.hangReportS;
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period));
}

bool holds(const std::vector<int>& ranks, int rank) {
  for (int r : ranks)
    if (r == rank) return true;
  return false;
}

// What the leader takes from this follower: summaries of the communicator's ranks it named in MEMBERS (a rank noted
// later, in a process holding several, stays out), as JSON.
std::string summariesOf(uint64_t commId, const std::vector<int>& ranks) {
  std::vector<diagnose::PeerSummary> mine;
  for (diagnose::PeerSummary& s : diagnose::diagnoser().localSummaries(commId))
    if (holds(ranks, s.rank)) mine.push_back(std::move(s));
  return diagnose::summariesToJson(mine);
}

// The process's report without this communicator's ranks it did not name (other communicators' stay: the leader
// analyses per communicator and checks only its own).
void keepNamed(diagnose::ProcessReport& r, uint64_t commId, const std::vector<int>& ranks) {
  auto foreign = [&](uint64_t c, int rank) { return c == commId && !holds(ranks, rank); };
  r.waits.erase(std::remove_if(r.waits.begin(), r.waits.end(),
                               [&](const diagnose::WaitEntry& w) { return foreign(w.commId, w.rank); }),
                r.waits.end());
  r.ranks.erase(std::remove_if(r.ranks.begin(), r.ranks.end(),
                               [&](const diagnose::RankEntry& k) { return foreign(k.commId, k.rank); }),
                r.ranks.end());
}

}  // namespace

void Service::sendDiagnosis(Entry& e, Conn& c) {
  diagnose::Diagnoser& d = diagnose::diagnoser();
  const uint64_t commId = e.a->commId();
  if (e.membersRanks.empty()) return;  // the leader takes nothing from a follower that named no rank
  // Only into a queue with room: a leader that reads slowly gets the next period instead of a growing backlog.
  constexpr size_t kQueueRoom = 64 * 1024;
  if (d.settings().stragglerPeriodS > 0 && c.out.size() < kQueueRoom) {
    const uint64_t p = d.periodsEnded();
    if (p != e.diagPeriodSent) {
      e.diagPeriodSent = p;
      std::string text = summariesOf(commId, e.membersRanks);
      if (text.size() <= kMaxDiagText) {
        sendDiagText(c, kDiagSummaries, text);
      } else if (!e.diagTooBigWarned) {
        e.diagTooBigWarned = true;
        ICN_WARN(subsys::Net, "diagnosis: comm 0x%llx: this process's straggler summaries (%zu bytes) exceed what "
                 "it sends the leader (%zu): the leader checks this communicator without them",
                 static_cast<unsigned long long>(commId), text.size(), kMaxDiagText);
      }
    }
  }
  if (d.settings().hangReportS > 0 && c.out.size() < kQueueRoom) {
    diagnose::ProcessReport r;
    const uint64_t seq = d.latestReport(&r);
    if (seq != e.diagReportSent) {
      e.diagReportSent = seq;
      keepNamed(r, commId, e.membersRanks);
      std::string text = diagnose::toJson(r);
      if (text.size() <= kMaxDiagText) sendDiagText(c, kDiagReport, text);
    }
  }
}

void Service::sendDiagText(Conn& c, uint8_t kind, const std::string& text) {
  constexpr size_t kChunk = kMaxPayload - 2;
  size_t off = 0;
  do {
    const size_t n = std::min(kChunk, text.size() - off);
    send(c, kDiag, diagPayload(kind, off + n == text.size(), text.data() + off, n));
    off += n;
  } while (off < text.size() && !c.dead);
}

void Service::onDiag(Conn& c, Reader& r) {
  const uint8_t kind = r.u8(), last = r.u8();
  if (!r.ok || (kind != kDiagSummaries && kind != kDiagReport) || last > 1)
    return lie(c, "sent a malformed DIAG");
  if (!c.diagIn.empty() && kind != c.diagKind) return lie(c, "interleaved two diagnosis messages");
  const size_t n = r.n - r.off;
  if (c.diagIn.size() + n > kMaxDiagText) {
    char buf[120];
    snprintf(buf, sizeof buf, "sent a diagnosis message over %zu bytes", kMaxDiagText);
    return lie(c, buf);
  }
  c.diagKind = kind;
  c.diagIn.append(reinterpret_cast<const char*>(r.p + r.off), n);
  if (!last) return;
  std::string text = std::move(c.diagIn);
  c.diagIn.clear();
  const auto now = Clock::now();
  if (now - c.diagWindow[kind] >= diagWindow(kind)) {
    c.diagWindow[kind] = now;
    c.diagCount[kind] = 0;
  }
  if (++c.diagCount[kind] > kDiagPerWindow) {
    if (!c.diagWarned)
      ICN_WARN(subsys::Net, "diagnosis: comm 0x%llx: follower %s sends its %s more than %d times a period; the "
               "extra ones are dropped unread", static_cast<unsigned long long>(c.entry->a->commId()),
               c.peer.c_str(), kind == kDiagSummaries ? "straggler summaries" : "hang reports", kDiagPerWindow);
    c.diagWarned = true;
    return;
  }
  if (kind == kDiagSummaries) return takeDiagSummaries(c, text);
  takeDiagReport(c, text);
}

void Service::takeDiagSummaries(Conn& c, const std::string& text) {
  std::vector<diagnose::PeerSummary> v;
  std::string why;
  if (!diagnose::summariesFromJson(text, &v, &why)) return lie(c, "sent unreadable straggler summaries (" + why + ")");
  const uint64_t commId = c.entry->a->commId();
  for (const diagnose::PeerSummary& s : v) {
    if (s.commId != commId) return lie(c, "sent straggler summaries of another communicator");
    // Without MEMBERS (a process that knows none of its ranks) nothing ties a summary to the sender.
    if (!holds(c.ranks, s.rank))
      return lie(c, "sent straggler summaries of rank " + std::to_string(s.rank) + ", which it does not hold");
  }
  if (v.empty()) return;
  if (diagnose::diagnoser().remoteSummariesTaken() == 0)
    ICN_INFO(subsys::Net, "diagnosis: comm 0x%llx: straggler summaries gathered from the other processes (first: "
             "follower %s, %zu peers)", static_cast<unsigned long long>(commId), c.peer.c_str(), v.size());
  diagnose::diagnoser().addRemoteSummaries(std::move(v));
}

void Service::takeDiagReport(Conn& c, const std::string& text) {
  diagnose::ProcessReport r;
  std::string why;
  if (!diagnose::reportFromJson(text, &r, &why)) return lie(c, "sent an unreadable hang report (" + why + ")");
  const std::string of = r.host + ":" + std::to_string(r.pid);
  if (!c.reportOf.empty() && of != c.reportOf)
    return lie(c, "sent hang reports of two processes (" + c.reportOf + " and " + of + ")");
  const uint64_t commId = c.entry->a->commId();
  for (const diagnose::WaitEntry& w : r.waits)
    if (w.commId == commId && !holds(c.ranks, w.rank))
      return lie(c, "sent a hang report of rank " + std::to_string(w.rank) + ", which it does not hold");
  for (const diagnose::RankEntry& k : r.ranks)
    if (k.commId == commId && !holds(c.ranks, k.rank))
      return lie(c, "sent a hang report of rank " + std::to_string(k.rank) + ", which it does not hold");
  c.reportOf = of;
  ICN_INFO(subsys::Net, "diagnosis: comm 0x%llx: hang report of %s from follower %s (%s, %zu waits)",
           static_cast<unsigned long long>(commId), of.c_str(), c.peer.c_str(), r.stalled ? "stalled" : "resumed",
           r.waits.size());
  diagnose::diagnoser().addRemoteReport(std::move(r));
}

}  // namespace icn::tuner::agree
