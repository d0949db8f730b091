#include "core/connect_driver.h"

#include "core/log.h"
#include "core/params.h"

namespace icn {

Status advanceConnect(OobConnector& oob, ConnectionSetup& setup, bool* peerKnown, bool* confirmed, bool* done) {
  *done = false;
  Handshake::Phase phase;
  ICN_CHECK(oob.progress(&phase));
  if (phase == Handshake::Phase::PeerKnown && !*peerKnown) {
    ICN_CHECK(setup.onPeerKnown(oob.handshake(), nullptr));
    *peerKnown = true;
  }
  if (*peerKnown && !*confirmed) {
    bool ready = false;
    ICN_CHECK(setup.poll(&ready));
    if (ready) {
      *confirmed = true;
      oob.handshake().confirm();
      ICN_CHECK(oob.progress(&phase));
    }
  }
  *done = phase == Handshake::Phase::Done;
  return Status::Ok;
}

bool setupOverdue(const Handshake& hs, std::chrono::steady_clock::time_point taken) {
  const long long limitMs = params::getInt(params::Id::ConnectTimeoutMs);
  if (std::chrono::steady_clock::now() - taken <= std::chrono::milliseconds(limitMs)) return false;
  ICN_WARN(subsys::Net, "connection from %s: its transport set-up was not ready %lld ms after the handshake "
           "(ICN_CONNECT_TIMEOUT_MS; the peer left during the set-up?): dropped", hs.peerName().c_str(), limitMs);
  return true;
}

}  // namespace icn
