// Across real hosts: with ICN_PAIR_RANK=0|1 and ICN_PAIR_PEER=HOST:PORT a suite process runs only its own
// rank of every pair, and a process of the same suite on the other host runs the other rank. Rank 0 listens
// on PORT (HOST is ignored there), rank 1 connects to HOST:PORT. For each pair the two processes open two
// TCP connections: a control one (which test this is, then each side's outcome) and a data one, which
// becomes the ranks' pipe as the socketpair does on one host.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <string>

namespace icn::testpair::remote {

struct Config {
  int rank = -1;  // -1: not across hosts
  std::string host, port;
};
// Parsed once from the environment; rank -1 when ICN_PAIR_RANK is unset. A malformed setting aborts with
// a message (a suite run that silently forks both ranks locally would prove nothing).
const Config& config();

struct Link {
  int control = -1, data = -1;
};
// Opens both connections for the next pair and checks that the peer runs the same test; on failure returns
// false with *err set and nothing left open.
bool open(const std::string& testName, std::chrono::seconds limit, Link* out, std::string* err);

struct Outcome {
  pid_t pid = 0;
  int status = 0;
  bool hung = false;
  std::string log;
};
// Sends ours and receives the peer's outcome on the control connection (closing it); false when the peer
// sent none within `limit`.
bool exchange(int control, const Outcome& mine, Outcome* theirs, std::chrono::seconds limit, std::string* err);

}  // namespace icn::testpair::remote
