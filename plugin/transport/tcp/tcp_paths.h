// What the connections of a process know of the paths their lanes take. A path is a pair of addresses, this end's
// rail and the peer's; every connection between the same two hosts over the same two links shares it. When one
// connection finds a lane on a path dead (no acknowledgement while its other lanes had theirs, or a socket error),
// the others' lanes on that path are dead too, but each would find out only when it next hands that lane a piece
// and waits ICN_TCP_LANE_STALL_MS for nothing: under a collective that waits on each connection in turn, those waits
// add up. The failure is written here, and each connection gives up its own lanes on the path that were admitted
// before it and have shown no acknowledgement since (the connection decides; this only keeps the fact). A peer that
// stalls its own lane on purpose costs the process's idle lanes to its host a give-up and a return about half a
// second later (lanes that carry and are acknowledged stay), never data.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/socket.h"

namespace icn::tcp {

class PathHealth {
 public:
  // At most this many paths are remembered (peers choose the addresses they offer); the oldest failure goes first.
  static constexpr size_t kMaxPaths = 1024;

  // A lane from `local` to `peer` failed at nowNs. Addresses other than IPv4 and IPv6 make no path.
  void failed(const SockAddr& local, const SockAddr& peer, int64_t nowNs);
  // When a lane on the path last failed; 0 when none did (or it was forgotten).
  int64_t failedAt(const SockAddr& local, const SockAddr& peer) const;
  // Failures recorded so far; a connection with nothing new since its last look reads nothing else.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  static std::string keyOf(const SockAddr& local, const SockAddr& peer);
  mutable std::mutex mu_;
  std::unordered_map<std::string, int64_t> failedAt_;
  std::atomic<uint64_t> generation_{0};
};

// The process's one registry.
PathHealth& paths();

// What a connection does with one of its live lanes on a path that failed at failedAtNs (0: never): keep it,
// give it up, or look again soon (it waits for acknowledgements, and the last one came less than kPathQuietNs ago:
// one whose acknowledgements flow shows it within two of the comm's looks, 10 ms apart).
enum class PathVerdict { Keep, GiveUp, LookAgain };
constexpr int64_t kPathQuietNs = 50'000'000;
// sinceNs: when the lane connected (a failure before that says nothing of it); lastAckNs: when its acknowledged
// bytes last grew (no earlier than sinceNs); waiting: it holds bytes not acknowledged yet.
PathVerdict judgeLaneOnPath(int64_t failedAtNs, int64_t sinceNs, int64_t lastAckNs, bool waiting, int64_t nowNs);

}  // namespace icn::tcp
