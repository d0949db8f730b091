// Same-host fast path on top of UCX tag matching.
//
// For a large message to a peer on this host, the sender does not push the payload through UCX: it
// sends a small descriptor (where the bytes are, how many, where to signal completion) on the same
// tag, with kDescBit set. The receiver's posted receive ignores that bit, so descriptors and ordinary
// messages match in the one FIFO order UCX already guarantees. The receiver then pulls the payload
// with the parallel copy engine and writes the sender's completion word. UCX's own rendezvous copies
// in the single proxy thread; this path copies on several cores.
#pragma once
#include <sys/types.h>
#include <ucp/api/ucp.h>

#include <cstdint>

namespace icn::ucx {

constexpr ucp_tag_t kDescBit = ucp_tag_t{1} << 62;
constexpr uint64_t kDescMagic = 0x49434e4644455343ULL;  // "ICNFDESC"

struct FastDescriptor {
  uint64_t magic;
  uint64_t src;       // sender's buffer
  uint64_t size;
  uint64_t doneWord;  // sender's completion word, set to 1 by the receiver
  int64_t pid;        // sender's process
};
static_assert(sizeof(FastDescriptor) == 40);

// The word a connector exposes so the acceptor can prove it may read its memory (CMA permission).
const uint64_t* cmaProbeWord();
constexpr uint64_t kCmaProbeValue = 0x49434e43504f4b21ULL;

// Whether the acceptor can pull from this peer: same host and a successful probe read.
bool fastPathPossible(const char* peerHost, pid_t peerPid, uint64_t probeAddr);

}  // namespace icn::ucx
