// Per-peer summaries: the figures of every connection between one communicator rank and one peer in one direction,
// over one period (since the previous summary). They are what a process contributes to the straggler check of a
// communicator, so they travel between processes as JSON (peers are untrusted: the reader bounds counts and string
// lengths).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diagnose/link_monitor.h"

namespace icn::diagnose {

struct PeerSummary {
  uint64_t commId = 0;
  int rank = -1;
  int peerRank = -1;
  Dir dir = Dir::Send;
  std::string host, addr, peerHost, peerAddr;
  uint32_t links = 0;      // connections merged into this summary
  uint32_t pending = 0;    // operations pending at the summary's time
  WindowFigures fig;
};

// Groups connections by (commId, rank, peerRank, dir) and takes each one's window (LinkMonitor::takeWindow: the
// waits since the previous summary). The period's rate is the wire measure where the connections had at least
// kWireMinNs of it over kWireMinBytes, else the median pace of the messages measured (link_monitor.h). The
// kernel counts a socket's busy time in jiffies (1-4 ms): 100 ms of it keeps that rounding to a few percent.
constexpr uint64_t kWireMinNs = 100'000'000;
constexpr uint64_t kWireMinBytes = 1u << 20;
std::vector<PeerSummary> summarize(const std::vector<std::shared_ptr<LinkMonitor>>& links);

// Bounds on summaries read from a peer.
constexpr size_t kMaxSummaries = 8192;
constexpr size_t kMaxSummaryText = 4u << 20;
constexpr size_t kMaxNameBytes = 255;

std::string toJson(const PeerSummary& s);
std::string summariesToJson(const std::vector<PeerSummary>& all);  // a JSON array
// False with *why (and nothing appended) when the text is not such an array, exceeds a bound, or holds a value
// out of range (negative times, unknown direction).
bool summariesFromJson(const std::string& text, std::vector<PeerSummary>* out, std::string* why);

// "0x1234abcd": the communicator id as every report spells it.
std::string commIdText(uint64_t commId);
bool parseCommId(const std::string& text, uint64_t* out);

}  // namespace icn::diagnose
