// The control connection of an established comm (the handshake's TCP socket): it tells each side that the other
// is alive, carries one failure notice when a side gives up, and, for transports that ask for it, small framed
// messages (the verbs transport's failover: which link died, what the receiver holds).
//
// Frames: 0xF7 len8 text (failure notice, then the sender closes its half) | 0xF8 len16le payload (message).
// Everything from the peer is bounded: frames up to kMaxMessage bytes, at most kMaxInbox unread messages; a
// frame that breaks either rule, or bytes that are no frame, end the connection (the peer is then "gone").
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "core/socket.h"
#include "core/status.h"

namespace icn {

class ControlChannel {
 public:
  static constexpr size_t kMaxMessage = 1024;
  static constexpr size_t kMaxInbox = 8;

  ControlChannel() = default;
  ControlChannel(Fd fd, std::string peerName) : fd_(std::move(fd)), peerName_(std::move(peerName)) {}
  // Ok while the peer's process and the link are alive; RemoteError (logged once) otherwise. Reads what the peer
  // sent at most every 50 ms (cheap to call often).
  Status checkAlive();
  // Tells the peer why this side gave up on the connection (a short text; best effort, never blocks) and closes
  // our sending half, so that the peer's checkAlive() fails at once with that reason instead of waiting for a
  // fault it cannot see (e.g. a verbs sender whose packets are lost while the receiver has nothing in flight).
  void notifyFailure(const std::string& why);
  // Messages (only after enableMessages(); without it a message frame from the peer ends the connection).
  void enableMessages() { messages_ = true; }
  // Queues one message (at most kMaxMessage bytes) and sends what the socket takes now, the rest on later calls;
  // false when the channel is dead or the peer has left more than 16 KiB unread.
  bool sendMessage(std::span<const uint8_t> payload);
  // The oldest unread message; false when none.
  bool nextMessage(std::vector<uint8_t>* out);
  // Why checkAlive() declared the peer gone ("" while it is alive).
  const std::string& deadReason() const { return deadReason_; }
  const std::string& peerName() const { return peerName_; }
  int fd() const { return fd_.get(); }

 private:
  Status die(const std::string& why);
  bool flushOut();
  // Parses whole frames from in_: false (with *why) on a frame that breaks the rules or ends the connection.
  bool parseFrames(std::string* why);

  Fd fd_;
  std::string peerName_;
  bool dead_ = false;
  bool notified_ = false;
  bool messages_ = false;
  std::string deadReason_;
  std::chrono::steady_clock::time_point lastPoll_{};
  std::vector<uint8_t> in_;   // bytes of an incomplete frame
  std::vector<uint8_t> out_;  // queued message bytes the socket did not take yet
  std::deque<std::vector<uint8_t>> inbox_;
};

}  // namespace icn
