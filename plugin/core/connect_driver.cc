#include "core/connect_driver.h"

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

}  // namespace icn
