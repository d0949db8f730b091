// Lane 0 over two rails. A connection with failover over two or more rails runs lane 0 (small messages one way,
// clear-to-send and failover records the other) over two sockets, "copies", on two rails: every byte of lane 0
// goes out on both in the same order, and each byte is read from whichever copy brings it first (the other copy's
// bytes up to there are read and dropped). A rail that fails under lane 0 then costs nothing: the other copy
// already carries everything. Both directions use the same two sockets. A copy is dropped, both ways (its socket
// is shut down, so the peer drops it too), on a socket error, when the peer ended it, or when it fell half a ring
// behind the other copy with the ring full (its rail is down, or far slower). Bytes stay in the ring until every
// live copy's socket took them, so the copy left behind loses none; the ring is the only buffer, its size fixed.
// A dropped copy comes back on a new socket (the comm's recovery, as for helper lanes): each end writes the
// position of its stream that the new socket starts at (8 bytes, little-endian), then its stream from there on:
// from the oldest byte its ring still holds, so whatever the peer has not read from the other copy yet and the
// ring still has comes again (and is skipped where the peer has it). A copy whose start lies past what the reader
// has, once it is the only one left, can never fill the gap: the stream fails rather than wait.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace icn::tcp {

// A lane's incoming bytes, read without blocking.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into buf: *got > 0; or *got == 0 when nothing is there yet, or with *closed when the stream
  // ended. An error says why in *why.
  virtual Status read(uint8_t* buf, size_t n, size_t* got, bool* closed, std::string* why) = 0;
};

// One socket as a ByteSource.
class SocketSource final : public ByteSource {
 public:
  explicit SocketSource(int fd) : fd_(fd) {}
  Status read(uint8_t* buf, size_t n, size_t* got, bool* closed, std::string* why) override;

 private:
  int fd_;
};

class Lane0Mirror final : public ByteSource {
 public:
  static constexpr int kCopies = 2;
  // fds: the copies' sockets (not owned: they outlive the mirror); rails: their names, for the log; ringBytes: the
  // most this end's copies may differ by before the one behind is dropped.
  Lane0Mirror(std::array<int, kCopies> fds, std::array<std::string, kCopies> rails, size_t ringBytes,
              std::string peer);

  // Outgoing: takes what fits of [p, p + n) into the ring; returns how much.
  size_t append(const void* p, size_t n);
  // Writes what the ring holds to every live copy that has room. Error (*why) once no copy is left.
  Status flush(std::string* why);
  // Bytes ever queued, and the furthest any copy's socket took (never goes back).
  uint64_t queued() const { return queued_; }
  uint64_t sent() const { return furthest_; }
  // A live copy has bytes of the ring still to write.
  bool pending() const;

  // Incoming: the next bytes of the peer's stream, from whichever live copy is there first. *closed once every
  // copy ended (the peer closed); an error once every copy is gone and one of them failed.
  Status read(uint8_t* buf, size_t n, size_t* got, bool* closed, std::string* why) override;

  int liveCopies() const;
  bool live(int c) const { return copies_[static_cast<size_t>(c)].live; }
  const std::string& rail(int c) const { return copies_[static_cast<size_t>(c)].rail; }
  // Drops a copy from outside (a rail known dead): logged with `why`.
  void drop(int c, const std::string& why, bool failed);
  // Copy c, dropped, comes back on `fd` (not owned; the old socket may be closed after this); the peer's start
  // position is read before its first byte. speakFirst: write ours now (the end whose handshake finished last);
  // else only once the peer's has arrived, so nothing reaches the peer's handshake while it may still read.
  void readmit(int c, int fd, bool speakFirst);
  // Reads and drops whatever the copies hold (at close: unread bytes would make close() reset the connection).
  void drain();

 private:
  struct Copy {
    int fd = -1;
    std::string rail;
    bool live = true;
    uint64_t written = 0;  // bytes of our stream its socket took
    uint64_t read = 0;     // bytes of the peer's stream read from it
    uint8_t start[8] = {};  // a re-admitted copy: the peer's start position, as it arrives
    size_t startGot = 8;    // of those bytes (8: known, or the copy's first socket, which starts at 0)
    bool joining = false;   // re-admitted, our start not written yet: nothing goes out on it
  };
  bool writing(const Copy& c) const { return c.live && !c.joining; }
  // Writes our start position on c (from the oldest byte the ring holds) and lets the ring out on it.
  void speak(Copy& c);
  // Reads what is missing of c's start position; false while it is not all there (or c went).
  bool haveStart(Copy& c);
  void writeCopy(Copy& c);  // what its socket takes; drops it on an error
  void dropLaggard();
  void skipBehind(Copy& c);  // reads and drops what c holds of bytes already consumed from the other copy
  // Whether this read looks at every copy, not the lead's alone (see read()).
  bool everyCopyNow();
  uint64_t lowestWritten() const;
  const Copy& other(const Copy& c) const { return &c == &copies_[0] ? copies_[1] : copies_[0]; }

  std::array<Copy, kCopies> copies_;
  std::unique_ptr<uint8_t[]> ring_;  // allocated on first use
  size_t cap_;
  uint64_t queued_ = 0, furthest_ = 0;
  uint64_t consumed_ = 0;  // bytes of the peer's stream handed to the reader
  int lead_ = 0;           // the copy that brought the last bytes
  int leadOnly_ = 0;       // reads since the last that looked at every copy
  int quietReads_ = 0;     // reads in a row that brought nothing (counted up to a bound)
  std::string peer_;
  bool ended_ = true;      // every copy gone so far ended by the peer's close (none failed)
  std::string lastError_;  // why the last failed copy failed
};

}  // namespace icn::tcp
