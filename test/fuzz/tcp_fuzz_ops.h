// Opcodes of the TCP fuzzers' scripts (the first byte of each action, taken modulo kOps), shared by the harnesses
// and the seed generator (tcp_fuzz_seeds.cc). Appending keeps existing seeds meaningful; reordering does not.
#pragma once
#include <cstdint>

namespace icn::fuzz {

namespace recv_ops {  // fuzz_tcp_recv: a hostile sender
enum Op : uint8_t { Post, Test, Piece, Message, Eager, Raw, ReadCts, Reading, Shrink, ShutLane, CloseLane, Control,
                    Pause, Repeat, LaneDown, Resend, kOps };
}
namespace send_ops {  // fuzz_tcp_send: a hostile receiver
enum Op : uint8_t { Isend, Test, Cts, Answer, Raw, ReadLane, Reading, Shrink, ShutLane, CloseLane, Control, Pause,
                    Repeat, LaneClosed, Done, kOps };
}
namespace setup_ops {  // fuzz_tcp_setup: a hostile connector or acceptor
enum Op : uint8_t { Connect, HelloFrame, ReadyFrame, ChallengeFrame, Frame, Raw, Stream, Flush, ShutWr, Close, Reset,
                    Shrink, Poll, Honest, Pause, Repeat, kOps };
}

}  // namespace icn::fuzz
