// Rails of a TCP connection: the interfaces its helper lanes are spread over. The device knows its own rails
// (core/socket.h pickRails); the acceptor advertises the listening address of each of its other rails in its
// control answer, and the connector pairs them with its own by subnet, then deals the helper lanes out over the
// pairs in turn. Lane 0 and the control socket stay on the handshake's path.
#pragma once
#include <string>
#include <vector>

#include "core/socket.h"
#include "transport/tcp/tcp_wire.h"

namespace icn::tcp {

RailAddr toRailAddr(const SockAddr& a);
SockAddr fromRailAddr(const RailAddr& r);

// One path a lane may take: from a local interface (bound to its address, or the kernel's choice on the
// handshake's path) to an address of the peer.
struct RailPath {
  std::string ifname;  // the local interface
  bool bindSource = false;
  SockAddr source;
  SockAddr dest;
};

// Pairs the peer's advertised rails with ours: path 0 is the handshake's (to `handleAddr`, from local rail 0);
// each further path joins one unused local rail and one peer rail in the local rail's subnet. A peer rail that
// no local interface reaches on-link is left out (a peer's word never sends a connection elsewhere).
std::vector<RailPath> pairRails(const std::vector<Rail>& local, const SockAddr& handleAddr, const Blob& answer);

// The path helper lane `lane` (1-based) takes: the paths in turn.
inline size_t pathOfLane(size_t lane, size_t paths) { return paths <= 1 || lane == 0 ? 0 : (lane - 1) % paths; }

// "eth0 -> 10.0.0.2 (lanes 0,1,3), eth1 -> 10.0.1.2 (lanes 2,4)" for a connection's log line: each rail's name
// and the lanes on it.
std::string describeLanes(const std::vector<std::string>& railNames, const std::vector<int>& laneRail);
// A SockAddr's IP address without its port.
std::string ipOnly(const SockAddr& a);

}  // namespace icn::tcp
