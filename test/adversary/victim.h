// The two ranks of an adversary test. Rank 0 is the victim: it listens through the real plugin, accepts every
// connection that completes, posts one receive (between guard bytes) on each as soon as it appears, and keeps
// calling accept() (which must never fail) until rank 1 is done. Rank 1 runs the attack, then connects honestly
// through the plugin and sends a pattern, so each test also shows that honest peers of the same listener keep
// working.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "hostile_peer.h"
#include "hostile_setups.h"
#include "pair_runner.h"

namespace icn::adversary {

using testpair::Rank;
using testpair::RankOutcome;
using testpair::RankSetup;

constexpr uint64_t kCommId = 0x1234;  // netapi::Plugin::init's default on both ranks
constexpr int kTag = 7;
constexpr size_t kPosted = 256 * 1024;  // bytes each victim receive posts
constexpr size_t kHonestBytes = 64 * 1024;
constexpr size_t kGuard = 4096;
constexpr uint64_t kHonestSeed = 42;

// What the victim tells rank 1 besides its handle: where its canary lives.
struct VictimInfo {
  int64_t pid = 0;
  uint64_t secretAddr = 0, doneWordAddr = 0;
};

struct VictimConn {
  void* comm = nullptr;
  std::vector<uint8_t> buf;  // guard | kPosted | guard
  void* req = nullptr;
  bool finished = false;
  ncclResult_t result = ncclSuccess;
  int got = 0;
  int completed = 0;  // receives completed without the honest pattern (victimReposts)
  uint8_t* data() { return buf.data() + kGuard; }
  bool guardsIntact() const;
  bool holdsHonestPattern() const;
};

struct VictimReport {
  std::vector<VictimConn> conns;
  bool canaryIntact = false;
  bool acceptAlwaysOk = true;
  long rssGrowthKiB = 0;  // the victim's resident set, from listening to the end of its receives
  int baseFds = 0, maxFds = 0;  // descriptors open right after listen(), and the most seen while accepting
  // The connections that did not receive the honest pattern: the hostile ones.
  std::vector<VictimConn*> hostile();
};

// From now on in this process: the victim posts another receive on a connection each time one completes without
// the honest pattern (as NCCL keeps receives posted on a connection), until one fails or `cap` have completed
// (0: one receive per connection).
void victimReposts(int cap);

// Rank 0. `expectComms` connections must complete (the honest one plus any hostile one that passes the
// handshake); `check` runs on the report inside the victim (gtest assertions count there).
void victimBody(Rank& r, size_t expectComms, const std::function<void(VictimReport&)>& check);

// Rank 1: runs `attack(listenerAddress, victimInfo)`, then the honest connection; the attack may leave
// connections open (they are closed after the honest transfer).
void attackerBody(Rank& r, const std::function<void(const SockAddr&, const VictimInfo&)>& attack);

// The victim's soft descriptor limit (RLIMIT_NOFILE), as a job's default: set through victimOnly in runAttack.
constexpr const char* kVictimNofileVar = "ADVERSARY_VICTIM_NOFILE";

// Rank 1's honest connect must finish within `limit` (measured from its first connect call; 0: no bound but
// the 30 s it waits). Set before runAttack.
void honestConnectWithin(Ms limit);

// Called in rank 1 once the victim has finished every receive and its checks (so every hostile message has been
// handled): for checks of state outside the victim, such as a third process's canary. Set by the attack.
void afterVictim(std::function<void()> f);

struct AttackOutcome {
  std::array<RankOutcome, 2> ranks;
  std::string hostileAddress;  // where rank 1's hostile connections came from (announced by WirePeer)
  const RankOutcome& operator[](size_t i) const { return ranks[i]; }
  // A victim WARN line with every needle that names the hostile peer by its address (the peer's claimed host
  // name proves nothing: the address is what the victim's kernel saw).
  bool victimWarns(const std::vector<std::string>& needles) const { return victimWarnCount(needles) > 0; }
  // The same, for a WARN that also names the rogue by its claimed host name ("rogue-peer:").
  bool victimWarnsNamingRogue(std::vector<std::string> needles) const {
    needles.insert(needles.begin(), "rogue-peer:");
    return victimWarns(needles);
  }
  // How many such lines: one per hostile connection when each must be refused for its own reason.
  size_t victimWarnCount(const std::vector<std::string>& needles) const;
};

// The address rank 1 announced for its hostile connections ("adversary: hostile connection from ADDR"; "" if none).
std::string announcedHostileAddress(const std::string& rank1Log);

// Both ranks with their environments (ICN_CONNECT_TIMEOUT_MS etc.); the same for both unless `victimOnly`. The
// transport is ICN_TRANSPORT of this process ("tcp", "ib", else ucx limited to UCX_TLS=tcp) unless `env` sets it.
AttackOutcome runAttack(const std::function<void(const SockAddr&, const VictimInfo&)>& attack, size_t expectComms,
                        const std::function<void(VictimReport&)>& check,
                        std::vector<std::pair<std::string, std::string>> env = {},
                        std::vector<std::pair<std::string, std::string>> victimOnly = {});

// The victim as a connector (rank 0): it connects through the real plugin with the handle rank 1 sends, calling
// connect() until it returns an error or a comm or `limit` passes, and samples its resident memory meanwhile.
struct ConnectReport {
  ncclResult_t result = ncclSuccess;
  bool gotComm = false;
  Ms took{0};
  long rssGrowthKiB = 0;  // the most resident memory seen during the connect, over what it was before
};

// Rank 1 runs `hostile` on a HostileListener whose handle it sent to the victim; stop() turns true once the victim
// has finished its connect. `check` runs inside the victim. Environments as in runAttack.
using HostileBody = std::function<void(HostileListener&, const std::function<bool()>& stop)>;
AttackOutcome runConnectAttack(const HostileBody& hostile, Ms limit, const std::function<void(const ConnectReport&)>& check,
                               std::vector<std::pair<std::string, std::string>> env = {});

}  // namespace icn::adversary
