// Writes the seed corpus of the TCP fuzzers: short scripts of what an honest peer does (so the fuzzer starts from
// exchanges that get through) and of the classic hostile moves, in the encoding the harnesses decode.
//   build-fuzz/test/fuzz/tcp_fuzz_seeds test/fuzz/corpus                  # corpus/tcp_recv, tcp_send, tcp_setup
//   build-fuzz/test/fuzz/tcp_fuzz_seeds --findings test/fuzz/findings     # the reproducers of known holes
// A script is the harness's set-up bytes, then actions: an opcode (tcp_fuzz_ops.h) and its arguments. A "pick"
// argument is an index into the harness's list of plausible values (see Input::pick).
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tcp_fuzz_ops.h"

namespace {

struct Script {
  std::vector<uint8_t> b;
  Script& u8(uint8_t x) {
    b.push_back(x);
    return *this;
  }
  template <class... T>
  Script& op(uint8_t o, T... args) {
    b.push_back(o);
    (b.push_back(static_cast<uint8_t>(args)), ...);
    return *this;
  }
  Script& bytes(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
};

std::string g_dir;
int g_written = 0;

void save(const std::string& sub, const std::string& name, const Script& s) {
  const std::string dir = g_dir + "/" + sub;
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* f = fopen(path.c_str(), "wb");
  if (!f || fwrite(s.b.data(), 1, s.b.size(), f) != s.b.size()) {
    perror(path.c_str());
    exit(1);
  }
  fclose(f);
  g_written++;
}

namespace rv = icn::fuzz::recv_ops;
// Set-up: helper lanes, eager limit (pick: 16384, 2048, 0, 65536, 1024).
Script recvConfig(uint8_t helpers, uint8_t eagerPick = 0) { return Script().u8(helpers).u8(eagerPick); }
// Post one receive: tag pick (1, 2, 3, 7, 0), size pick (100, 1000, 0, 1, 4096, 16384, 65536, 65537, 200000, 2048).
Script& post1(Script& s, int tagPick, int sizePick) { return s.op(rv::Post, 0, 0, tagPick, sizePick); }
// Post n grouped receives (n >= 2), all with the same tag and size picks.
Script& postN(Script& s, int n, int tagPick, int sizePick) {
  s.op(rv::Post, 160 + ((n - 1) - 160 % 8 + 8) % 8, 0);
  for (int i = 0; i < n; i++) s.u8(static_cast<uint8_t>(tagPick)).u8(static_cast<uint8_t>(sizePick));
  return s;
}
// A whole message for entry `index` of receive `target`, in `pieces` pieces starting on lane `lane`.
Script& message(Script& s, int target, int index, int pieces, int lane, bool reversed = false) {
  const int b = index + 8 * (pieces - 1) + (reversed ? 0x80 : 0);
  return s.op(rv::Message, target, b, lane, 0);
}
Script& test(Script& s, int target, int timesPick = 3) { return s.op(rv::Test, target, timesPick); }

void recvSeeds() {
  const char* d = "tcp_recv";
  {
    Script s = recvConfig(0);
    post1(s, 0, 1);
    message(s, 0, 0, 1, 0);
    test(s, 0);
    save(d, "lane0_whole", s);
  }
  {
    Script s = recvConfig(2);
    post1(s, 0, 8);
    message(s, 0, 0, 4, 0);
    test(s, 0);
    save(d, "split_over_helpers", s);
  }
  {
    Script s = recvConfig(3);
    post1(s, 1, 6);
    message(s, 0, 0, 4, 1, true);
    s.op(rv::Reading);
    test(s, 0);
    save(d, "split_reversed_reading", s);
  }
  {
    Script s = recvConfig(0);
    s.op(rv::Eager, 0, 0, 0, 0, 0, 0);  // lane 0, number 0, horizon 0, tag 1, 100 bytes
    s.op(rv::Eager, 0, 0, 0, 0, 1, 3);  // number 1, tag 1, 1000 bytes
    post1(s, 0, 1);
    test(s, 0);
    post1(s, 0, 1);
    test(s, 0);
    s.op(rv::ReadCts);
    save(d, "eager_before_receive", s);
  }
  {
    Script s = recvConfig(2);
    s.op(rv::Eager, 0xA0, 1, 0, 0, 0, 0, 6);  // helper lane 1, number 0, tag 1, 4096 bytes: held in the socket
    post1(s, 0, 4);
    test(s, 0);
    save(d, "early_held_on_helper", s);
  }
  {
    Script s = recvConfig(1);
    postN(s, 8, 1, 1);
    for (int i = 0; i < 8; i++) message(s, 0, i, 1 + i % 3, i);
    test(s, 0);
    s.op(rv::ReadCts);
    save(d, "grouped_eight", s);
  }
  {
    Script s = recvConfig(1);
    s.op(rv::Reading);
    for (int i = 0; i < 4; i++) post1(s, i % 4, 1);
    for (int i = 0; i < 4; i++) message(s, i, 0, 2, i);
    for (int i = 0; i < 4; i++) test(s, 0);
    save(d, "four_receives_reading", s);
  }
  {
    Script s = recvConfig(1);
    post1(s, 0, 1);
    s.op(rv::Piece, 0, 0, 0, 0, 0, 2, 0, 0, 0);  // tag + 1
    test(s, 0);
    save(d, "wrong_tag", s);
  }
  {
    Script s = recvConfig(1);
    post1(s, 0, 1);
    // Lane 1, the receive's own fields, total 500 (half the posted size), raw offset 490 and length 20.
    s.op(rv::Piece, 1, 0, 0, 0, 0, 0, 2, 0xE0, 0xEA, 0x01, 0, 0, 20, 0, 0, 0, 0);
    test(s, 0);
    save(d, "piece_outside_message", s);
  }
  {
    Script s = recvConfig(2);
    post1(s, 0, 1);
    s.op(rv::Raw, 2, 32).bytes("garbage where a header should be");
    test(s, 0);
    save(d, "garbage_on_helper", s);
  }
  {
    Script s = recvConfig(2);
    post1(s, 0, 8);
    s.op(rv::Piece, 1, 0, 0, 0, 0, 0, 0, 1, 0xEF);  // first of two pieces, cut short
    s.op(rv::CloseLane, 1);
    test(s, 0, 3);
    s.op(rv::Control, 0);
    test(s, 0, 3);
    save(d, "half_message_then_gone", s);
  }
  {
    Script s = recvConfig(1);
    post1(s, 0, 1);
    s.op(rv::ShutLane, 0x00);  // lane 0 half-closed
    s.op(rv::ShutLane, 0x21);  // lane 1 both ways
    test(s, 0, 3);
    save(d, "lanes_half_closed", s);
  }
  {
    Script s = recvConfig(1);
    post1(s, 0, 1);
    s.op(rv::Control, 2, 11).bytes("going away\x1b");
    test(s, 0, 3);
    save(d, "failure_notice", s);
  }
  {
    Script s = recvConfig(0);
    s.op(rv::Shrink, 1, 0);  // the comm's clear-to-send writes: smallest buffer
    post1(s, 0, 0);
    message(s, 0, 0, 1, 0);
    test(s, 0);
    s.op(rv::Repeat, 2, 20);  // post, message, test
    s.op(rv::ReadCts);
    save(d, "cycles_small_buffer", s);
  }
  {
    Script s = recvConfig(0, 2);
    s.op(rv::Post, 0, 0xC1, 4, 2);  // size 0, no buffer
    message(s, 0, 0, 1, 0);
    test(s, 0);
    save(d, "zero_bytes_no_buffer", s);
  }
  {
    Script s = recvConfig(0);
    post1(s, 3, 0);                      // a receive with tag 7: its tests make the comm read lane 0
    s.op(rv::Eager, 0, 0, 0, 0, 1, 0);  // small eager messages with tag 1: the 65th finds no stage slot
    s.op(rv::Repeat, 0, 70);
    test(s, 0);
    save(d, "eager_flood", s);
  }
  {  // Raw bytes on lane 0 that hold a whole eager header (ChunkHeader: magic "ICTD", horizon 0, flags eager,
     // tag 1, 0 bytes, number 0): the comm takes it and hands its credit back, though the harness never sent it
     // as an eager message.
    Script s = recvConfig(0);
    s.op(rv::Raw, 1, 32).bytes("ICTD");
    const uint8_t rest[28] = {0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0};  // seq, slot, index, flags, tag; then zeros
    for (uint8_t b : rest) s.u8(b);
    for (int i = 0; i < 2; i++) {
      post1(s, 0, 0);
      test(s, 0, 0);
      s.op(rv::ReadCts);
    }
    save(d, "raw_eager_header_on_lane0", s);
  }
  {  // 1-byte eager messages each completing the next receive: eager message 46 lands in receive 48, and its one
     // byte is also what a direct message for receive 48 would carry (content has 7 bits a byte).
    Script s = recvConfig(0);
    for (int i = 0; i < 2; i++) {
      post1(s, 0, 0);
      message(s, 0, 0, 1, 0);
      test(s, 0);
    }
    s.op(rv::Eager, 0, 0, 2, 0, 1, 2);  // lane 0, the next number, horizon 0, tag 1, 1 byte
    post1(s, 0, 0);
    test(s, 0);
    s.op(rv::Repeat, 2, 46);
    save(d, "short_eager_matches_direct_content", s);
  }
  {
    Script s = recvConfig(0);
    post1(s, 3, 0);
    s.op(rv::Eager, 0, 0xF0, 0xE8, 0x03, 0, 0, 0, 0, 1, 0);  // eager number 1000: far past the window
    test(s, 0);
    save(d, "eager_number_far", s);
  }
  {
    Script s = recvConfig(2);
    s.op(rv::Eager, 0xA0, 2, 2, 0, 0, 0, 6);  // number 1 on lane 2 before number 0
    s.op(rv::Eager, 0xA0, 1, 0, 0, 0, 0, 6);
    post1(s, 0, 4);
    post1(s, 0, 4);
    test(s, 0);
    test(s, 1);
    save(d, "early_out_of_order", s);
  }
  {  // Two rails: a message split over the lanes, lane 2 given up, the whole message resent on lane 1.
    Script s = recvConfig(0x82);
    post1(s, 0, 1);
    message(s, 0, 0, 3, 0);
    s.op(rv::LaneDown, 1);                      // lane 1 + 1 % 2 = 2
    s.op(rv::Resend, 1, 0, 0, 0, 0, 0, 0, 0, 0);  // lane 1, the receive's fields, all 1000 bytes
    s.op(rv::Reading);
    test(s, 0);
    save(d, "rails_lane_down_resend", s);
  }
  {  // Two rails: a lane-down record, then an eager message on lane 0 for a receive not posted yet (staged).
    Script s = recvConfig(0x82);
    post1(s, 0, 1);                      // tag 1: its tests read lane 0
    s.op(rv::LaneDown, 0);               // lane 1
    s.op(rv::Eager, 0, 0, 0, 0, 2, 0);  // lane 0, number 0, horizon 1 (the next record), tag 2, 100 bytes
    test(s, 0);
    post1(s, 1, 1);  // tag 2
    test(s, 1);
    s.op(rv::ReadCts);
    save(d, "rails_lane_down_staged_eager", s);
  }
  {  // Two rails: an empty eager message held on lane 2 (number 1 before 0), lane 2 given up while it holds it, then
     // number 0 on lane 1 brings number 1's turn: its receive is whole without lane 2.
    Script s = recvConfig(0x82);
    post1(s, 0, 1);                           // tag 1
    s.op(rv::Eager, 0xA0, 2, 2, 2, 0, 0, 1);  // lane 2, number 1, horizon 0, the receive's tag, 0 bytes
    s.op(rv::Pause, 2);
    s.op(rv::LaneDown, 1);                    // lane 2
    test(s, 0, 0);                            // one test: it reads the lane-down; lane 2's reader stops after
    s.op(rv::Eager, 0xA0, 1, 0, 2, 0, 2, 0);  // lane 1, number 0, horizon 0, tag 2, 100 bytes
    s.op(rv::Pause, 2);
    test(s, 0);
    save(d, "rails_empty_eager_on_given_up_lane", s);
  }
}

namespace sd = icn::fuzz::send_ops;
Script sendConfig(uint8_t helpers, uint8_t eagerPick = 0) { return Script().u8(helpers).u8(eagerPick); }
// isend: size pick (100, 0, 1, 2048, 2049, 16384, 16385, 65536, 65537, 200000, 4096), tag pick (1, 2, 3, 7).
Script& isend(Script& s, int sizePick, int tagPick = 0) { return s.op(sd::Isend, sizePick, tagPick); }

void sendSeeds() {
  const char* d = "tcp_send";
  {
    Script s = sendConfig(0);
    isend(s, 0);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    s.op(sd::ReadLane, 0);
    save(d, "small_on_lane0", s);
  }
  {
    Script s = sendConfig(2);
    s.op(sd::Reading);
    isend(s, 9);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    s.op(sd::Test, 0, 3);
    save(d, "split_over_helpers", s);
  }
  {
    Script s = sendConfig(1);
    s.op(sd::Reading);
    isend(s, 0);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    for (int i = 0; i < 3; i++) {
      isend(s, 0);
      s.op(sd::Test, 0, 3);
    }
    s.op(sd::Answer, 3, 1);
    isend(s, 3);
    s.op(sd::Test, 0, 3);
    save(d, "eager_then_records", s);
  }
  {
    Script s = sendConfig(2);
    s.op(sd::Reading);
    isend(s, 0);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    isend(s, 6);  // 16385 bytes: early, whole on a helper lane
    isend(s, 7);  // 65536
    s.op(sd::Test, 0, 3);
    s.op(sd::Test, 1, 3);
    s.op(sd::Answer, 1, 1);
    s.op(sd::Answer, 1, 1);
    save(d, "early_on_helpers", s);
  }
  {
    Script s = sendConfig(3);  // early messages over more lanes than ICN_TCP_EARLY_LANES, then their records
    s.op(sd::Reading);
    isend(s, 0);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    isend(s, 6);
    s.op(sd::Repeat, 0, 5);
    s.op(sd::Answer, 7, 1);
    for (int i = 0; i < 6; i++) s.op(sd::Test, i, 3);
    save(d, "early_spread_then_records", s);
  }
  {
    Script s = sendConfig(1);
    for (int i = 0; i < 8; i++) isend(s, 3 + i % 3, i % 4);
    s.op(sd::Answer, 7, 1);
    s.op(sd::Reading);
    for (int i = 0; i < 8; i++) s.op(sd::Test, 0, 3);
    save(d, "grouped_eight", s);
  }
  {
    Script s = sendConfig(1);
    isend(s, 0);
    s.op(sd::Cts, 0, 0, 0, 0, 0, 0xF8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0);  // bad magic
    s.op(sd::Test, 0, 3);
    save(d, "cts_bad_magic", s);
  }
  {
    Script s = sendConfig(1);
    isend(s, 0);
    s.op(sd::Cts, 2, 0, 0, 0, 0, 0, 0, 0, 0);  // sequence 1 first
    s.op(sd::Test, 0, 3);
    save(d, "cts_out_of_order", s);
  }
  {
    Script s = sendConfig(1);
    isend(s, 0);
    s.op(sd::Cts, 0, 0, 0, 4, 4, 0, 0, 0, 0);  // 65 + 193 credits
    s.op(sd::Test, 0, 3);
    save(d, "cts_too_many_credits", s);
  }
  {
    Script s = sendConfig(1);
    isend(s, 3);
    s.op(sd::Cts, 0, 0, 0, 0, 0, 0, 0, 0, 3);  // entry one byte smaller than the send
    s.op(sd::Test, 0, 3);
    save(d, "cts_entry_too_small", s);
  }
  {
    Script s = sendConfig(2);
    isend(s, 9);
    s.op(sd::Answer, 0, 1);
    s.op(sd::CloseLane, 1);
    s.op(sd::Test, 0, 3);
    s.op(sd::Control, 0);
    s.op(sd::Test, 0, 3);
    save(d, "lanes_closed_mid_send", s);
  }
  {
    Script s = sendConfig(3);
    s.op(sd::Shrink, 1, 0);
    s.op(sd::Shrink, 2, 0);
    isend(s, 9);
    isend(s, 8);
    s.op(sd::Answer, 1, 1);
    s.op(sd::Test, 0, 3);
    s.op(sd::Reading);
    s.op(sd::Test, 0, 3);
    s.op(sd::Test, 1, 3);
    save(d, "small_buffers_large_sends", s);
  }
  {
    Script s = sendConfig(1);
    s.op(sd::Reading);
    isend(s, 0);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    s.op(sd::Repeat, 2, 40);  // isend, answer, test
    save(d, "cycles", s);
  }
  {
    Script s = sendConfig(1);
    isend(s, 0);
    s.op(sd::Raw, 1, 7).bytes("ICTC\x00\x00\x00");
    s.op(sd::Test, 0, 3);
    s.op(sd::ShutLane, 0x10);
    s.op(sd::Test, 0, 3);
    save(d, "partial_record_then_shut", s);
  }
  {  // Two rails: helper lane 2 closed before the record, its pieces fail there, the lane is given up, closed by an
     // honest lane-closed record, and its pieces resent on lane 1; then the receive reported whole.
    Script s = sendConfig(0x82);
    s.op(sd::Reading);
    isend(s, 9);                   // 200000 bytes
    s.op(sd::CloseLane, 2);        // helper lane 2
    s.op(sd::Answer, 0, 1);
    for (int i = 0; i < 3; i++) s.op(sd::Test, 0, 3);
    s.op(sd::LaneClosed, 0, 0);    // the lane given up
    for (int i = 0; i < 3; i++) s.op(sd::Test, 0, 3);
    s.op(sd::Done, 0, 0);          // the latest record
    s.op(sd::Test, 0, 3);
    save(d, "rails_lane_given_up_resent", s);
  }
  {  // Two rails: lane 2 given up, then lane 1 closed too while its pieces are resent: every helper lane failed.
    Script s = sendConfig(0x82);
    s.op(sd::Reading);
    isend(s, 9);
    s.op(sd::CloseLane, 2);
    s.op(sd::Answer, 0, 1);
    s.op(sd::Test, 0, 3);
    s.op(sd::CloseLane, 1);
    s.op(sd::LaneClosed, 0x80, 0);  // lane 2, whether or not its lane-down was read yet
    for (int i = 0; i < 4; i++) s.op(sd::Test, 0, 3);
    save(d, "rails_second_failure_during_resend", s);
  }
  {  // Two rails: lane-closed for a lane never given up, then a receive-done record for a receive never posted.
    Script s = sendConfig(0x83);
    isend(s, 9);
    s.op(sd::Answer, 0, 1);
    s.op(sd::LaneClosed, 0x81, 0);  // lane 3
    s.op(sd::Test, 0, 3);
    s.op(sd::Done, 2, 0);           // sequence 1, none sent
    s.op(sd::Test, 0, 3);
    save(d, "rails_lane_closed_unasked", s);
  }
}

namespace su = icn::fuzz::setup_ops;
// Set-up: side (0: hostile connectors against the listener, 1: a hostile acceptor against connect()), commId pick.
Script listenerSide() { return Script().u8(0).u8(0); }
Script connectorSide() { return Script().u8(1).u8(0); }

void setupSeeds() {
  const char* d = "tcp_setup";
  for (int lanes = 0; lanes <= 2; lanes += 2) {
    Script s = listenerSide();
    s.op(su::Honest, 5, lanes);
    save(d, "listener_honest_lanes" + std::to_string(lanes), s);
  }
  {
    Script s = listenerSide();
    s.op(su::Honest, 1, 2);  // control answered, lanes never come
    s.op(su::Honest, 1, 2);
    s.op(su::Honest, 3, 1);  // every lane done, control READY never sent
    s.op(su::Poll, 2);
    save(d, "listener_stalled_setups", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Connect);
    s.op(su::Raw, 0, 20).bytes("GET / HTTP/1.0\r\n\r\n..");
    s.op(su::Connect);
    s.op(su::Frame, 1, 0, 4).bytes("abcd").u8(0).u8(4);  // HELLO, length 2 GiB
    s.op(su::Poll, 1);
    save(d, "listener_garbage", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Honest, 1, 1);  // control answered: its set-up holds token 4
    s.op(su::Connect);
    s.op(su::Poll, 0);
    s.op(su::HelloFrame, 1, 0, 0, 0, 0x00, 0, 0, 4, 0, 0);  // another control connection with token 4
    s.op(su::Poll, 1);
    save(d, "listener_token_reused", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Honest, 1, 1);  // control answered: lanes 0 and 1 expected, token 4
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::HelloFrame, 1, 0, 0, 0, 0x80, 4, 0, 4, 0, 0);  // lane 3 of it
    s.op(su::Poll, 1);
    save(d, "listener_lane_not_expected", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::HelloFrame, 0, 0, 0, 0, 0x80, 0, 0, 3, 0, 0);  // a lane of a connection never announced
    s.op(su::Poll, 1);
    save(d, "listener_unknown_lane", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::HelloFrame, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0);  // commId 0 against the listener's
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::HelloFrame, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0);  // the UCX transport's HELLO
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::HelloFrame, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0xD0);  // junk tag
    s.op(su::Poll, 1);
    save(d, "listener_refusals", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Honest, 1, 2);
    s.op(su::Stream, 0, 0, 0x42);  // 64 KiB of junk after HELLO
    save(d, "listener_stream_after_hello", s);
  }
  {
    Script s = listenerSide();
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::HelloFrame, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xF0);  // half a HELLO
    s.op(su::Reset, 0);
    s.op(su::Connect);
    s.op(su::ShutWr, 1, 1);
    s.op(su::Poll, 1);
    save(d, "listener_half_hello_reset", s);
  }
  for (int lanes = 0; lanes <= 2; lanes += 2) {
    Script s = connectorSide();
    s.op(su::Honest, 3, lanes);
    save(d, "connector_honest_lanes" + std::to_string(lanes), s);
  }
  {
    Script s = connectorSide();
    s.op(su::Honest, 1, 2);  // CHALLENGE and the control HELLO only
    s.op(su::Close, 0);
    s.op(su::Poll, 1);
    save(d, "connector_control_closed", s);
  }
  {
    Script s = connectorSide();
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::ChallengeFrame, 0, 0);
    s.op(su::ChallengeFrame, 0, 0);  // twice
    s.op(su::Poll, 1);
    s.op(su::Connect);
    s.op(su::Poll, 1);
    s.op(su::ChallengeFrame, 1, 0xE0);  // 15 bytes
    s.op(su::Poll, 1);
    save(d, "connector_bad_challenges", s);
  }
  {
    Script s = connectorSide();
    s.op(su::Honest, 0, 2);  // CHALLENGE only
    s.op(su::HelloFrame, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0);  // more lanes than it proposed (value pick: theirs + 1)
    s.op(su::Poll, 1);
    save(d, "connector_answer_more_lanes", s);
  }
  {
    Script s = connectorSide();
    s.op(su::Honest, 1, 2);                               // control answered; lanes challenged, not answered
    s.op(su::HelloFrame, 1, 0, 0, 0, 0, 4, 0, 0, 0, 0);  // lane 1's answer names another lane
    s.op(su::Poll, 1);
    save(d, "connector_lane_answer_mismatch", s);
  }
  {
    Script s = connectorSide();
    s.op(su::Honest, 1, 1);
    s.op(su::Stream, 0, 0, 0x42);  // 64 KiB after our HELLO
    save(d, "connector_stream_after_hello", s);
  }
  {
    Script s = connectorSide();
    s.op(su::Honest, 2, 2);
    s.op(su::Frame, 1, 0, 0, 1, 0);  // an empty READY to a lane
    s.op(su::Close, 2);
    s.op(su::Poll, 1);
    save(d, "connector_lane_trouble", s);
  }
}

// Scripts that break an invariant of the transport as it stood when the fuzzers first found each hole (kept in
// test/fuzz/findings, named after the harness that replays them; never seeds: a seed that fails would fail
// every fuzz run).
void findings() {
  {  // Two copies of the first half of a message complete it: its second half is never written.
    Script s = recvConfig(1);
    post1(s, 0, 1);
    s.op(rv::Piece, 0, 0, 0, 0, 0, 0, 0, 1, 0);  // piece 1 of 2: [0, 500) of the 1000-byte message
    s.op(rv::Piece, 1, 0, 0, 0, 0, 0, 0, 1, 0);  // the same piece again, on lane 1
    test(s, 0);
    save(".", "tcp_recv-duplicate-piece-completes", s);
  }
  {  // A sender that never reads lane 0 while receives complete: the unsent clear-to-send records outgrow their
     // buffer.
    Script s = recvConfig(0);
    s.op(rv::Shrink, 1, 0);  // the comm's lane 0 send buffer at its minimum
    post1(s, 0, 0);
    message(s, 0, 0, 1, 0);
    test(s, 0);
    s.op(rv::Repeat, 2, 127);
    s.op(rv::Repeat, 2, 127);
    save(".", "tcp_recv-unsent-cts-overflow", s);
  }
  {  // Connections that prove themselves and then stall: every one becomes a set-up the listener keeps.
    Script s = listenerSide();
    s.op(su::Honest, 1, 2);
    s.op(su::Repeat, 0, 17);
    save(".", "tcp_setup-listener-unbounded-setups", s);
  }
  {  // An acceptor that answers the control HELLO, then streams: the connector buffers all of it.
    Script s = connectorSide();
    s.op(su::Honest, 1, 2);
    s.op(su::Stream, 0, 2, 0x42);  // up to 4 MiB
    save(".", "tcp_setup-connector-unbounded-input", s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--findings") {
    g_dir = argv[2];
    findings();
    printf("%d reproducers written under %s\n", g_written, g_dir.c_str());
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s <corpus dir>          (writes <dir>/tcp_recv, tcp_send, tcp_setup)\n"
                    "       %s --findings <dir>      (the reproducers of test/fuzz/findings)\n", argv[0], argv[0]);
    return 2;
  }
  g_dir = argv[1];
  recvSeeds();
  sendSeeds();
  setupSeeds();
  printf("%d seeds written under %s\n", g_written, g_dir.c_str());
  return 0;
}
