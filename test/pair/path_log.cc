#include "path_log.h"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace icn::testpair {

SendPaths sendPaths(const std::string& log) {
  static const std::regex tcp(
      R"(TCP connection to .* closed: (\d+) messages sent, (\d+) eager \(<= (\d+) bytes, before the clear-to-send\), )"
      R"((\d+) early \(<= (\d+) bytes, before the clear-to-send, whole on a helper lane; at most (\d+) of (\d+) lanes at once\), )"
      R"((\d+) whole on lane 0, (\d+) split over)");
  static const std::regex ucx(
      R"(UCX connection to .* closed: (\d+) messages sent, (\d+) below UCX's rendezvous threshold \((\d+) bytes\), )"
      R"((\d+) from it)");
  static const std::regex lane0(R"(TCP device .* messages <= (\d+) bytes on lane 0)");
  static const std::regex lanes(R"(UCX send connection to .* ready, lanes (.*)$)");
  SendPaths p;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, tcp)) {
      p.transport = "tcp";
      p.connections++;
      p.messages += std::stoull(m[1]);
      p.eager += std::stoull(m[2]);
      p.eagerMax = std::stoull(m[3]);
      p.early += std::stoull(m[4]);
      p.earlyMax = std::stoull(m[5]);
      p.earlyLanesUsed = std::max(p.earlyLanesUsed, std::stoi(m[6]));
      p.earlyLanesAllowed = std::stoi(m[7]);
      p.lane0 += std::stoull(m[8]);
      p.split += std::stoull(m[9]);
    } else if (std::regex_search(line, m, ucx)) {
      p.transport = "ucx";
      p.connections++;
      p.messages += std::stoull(m[1]);
      p.belowRndv += std::stoull(m[2]);
      p.rndvFrom = std::stoull(m[3]);
      p.fromRndv += std::stoull(m[4]);
    } else if (std::regex_search(line, m, lane0)) {
      p.lane0Max = std::stoull(m[1]);
    } else if (p.lanes.empty() && std::regex_search(line, m, lanes)) {
      p.lanes = m[1];
    }
  }
  return p;
}

std::string describe(const SendPaths& p) {
  std::ostringstream o;
  o << (p.transport.empty() ? "no transport" : p.transport) << ", " << p.connections << " send connection(s), "
    << p.messages << " messages";
  if (p.transport == "tcp")
    o << ": " << p.eager << " eager (<= " << p.eagerMax << " B), " << p.early << " early (<= " << p.earlyMax
      << " B, " << p.earlyLanesUsed << " of " << p.earlyLanesAllowed
      << " lanes), " << p.lane0 << " on lane 0 (<= " << p.lane0Max
      << " B), " << p.split << " split";
  if (p.transport == "ucx")
    o << " over " << p.lanes << ": " << p.belowRndv << " below the rendezvous threshold (" << p.rndvFrom << " B), "
      << p.fromRndv << " from it";
  return o.str();
}

std::string lanesAgainstUcxTls(const SendPaths& p) {
  const char* env = getenv("UCX_TLS");
  const std::string tls = env ? env : "";
  if (tls == "tcp" && p.lanes.find("tcp/") == std::string::npos) return "UCX_TLS=tcp, lanes " + p.lanes;
  if (tls.find("posix") != std::string::npos && p.lanes.find("posix/") == std::string::npos)
    return "UCX_TLS=" + tls + ", lanes " + p.lanes;
  return "";
}

}  // namespace icn::testpair
