// The process's agreement service: one background thread that carries every communicator's agreement messages
// (agreement.h) over TCP.
//
// Rendezvous in a directory: the leader (the process holding rank 0) listens on the out-of-band interface (ICN_SOCKET_IFNAME,
// as the net plugin's handshake does) and writes its address and a fresh 32-byte secret into
// `<dir>/agree-<commId>-<nRanks>`, a private file (0600, atomic) in ICN_TUNER_RENDEZVOUS, by default the per-user
// runtime directory ($XDG_RUNTIME_DIR/icn, else /tmp/icn-<uid>). Followers read it and connect. Every rank reaches a
// directory of its own host, so by default processes of one host agree; ranks on several hosts agree when
// ICN_TUNER_RENDEZVOUS names a directory they share (a cluster's shared home or scratch file system). Where a
// follower cannot find the leader, nobody tunes that communicator (the leader never gets every rank's process).
//
// Rendezvous over the network (ICN_TUNER_RENDEZVOUS=tcp://host:port, for communicators spanning nodes, where no
// directory need be shared): a registry keyed by (commId, nRanks), served by whichever process of the host owning
// that address binds it first (wildcard, the given port). The leader registers its address until START; followers
// ask for it, connect, and keep asking until START. A registration claims rank 0: two live ones for a communicator
// void both, and the registry tells every client of it (its leader stops before START). The job key
// (ICN_AUTH_KEY) is the only secret: the registry's and every communicator's
// secret are HMACs of it, both ends of each connection prove theirs, and without a key the network form is refused
// (the communicator keeps NCCL's choice, with a WARN). An empty host is MASTER_ADDR, else NCCL_COMM_ID's host.
//
// Both ends prove knowledge of the secret (HMAC-SHA256 over both nonces and the commId) before anything else is
// read; a peer is otherwise untrusted: fixed-size frames, every field range-checked, bounded buffers, deadlines on
// connects and handshakes, at most 256 unproven connections (64 from one address; the oldest past 100 ms make room).
// A peer that breaks the protocol, or a follower that lies about its ranks or what it measured (agreement.h), is
// named in a WARN and its communicator stops where no rank has passed, which never blocks a collective. A leader
// re-reads its rendezvous file until START: another process writing there claims rank 0 too, and it stops.
#pragma once
#include <memory>
#include <string>

#include "tuner/agree/agreement.h"

namespace icn::tuner::agree {

// Starts carrying `a` (leader: publishes its address; follower: starts looking for it). `nNodes`: the
// communicator's node count (one node never needs the network rendezvous). False, with *why, when it cannot (no
// usable rendezvous, no job key for a network one, no listen address): the caller freezes the agreement.
bool attach(const std::shared_ptr<Agreement>& a, int nNodes, std::string* why);
// Stops carrying it (tells the other side it leaves, removes the leader's file). Joins the thread with the last one.
void detach(const Agreement* a);
// Where rendezvous files go (ICN_TUNER_RENDEZVOUS, else the per-user runtime directory); "" with *why if unusable.
std::string rendezvousDir(std::string* why);

}  // namespace icn::tuner::agree
