// Result codes of the core. Adapters map them 1:1 onto ncclResult_t (asserted in adapters/net_common.cc); the core
// never includes NCCL headers.
#pragma once

namespace icn {

enum class Status : int {
  Ok = 0,
  SystemError = 2,      // an OS / library call failed (socket, verbs, UCX)
  InternalError = 3,    // our own invariant broke
  InvalidArgument = 4,  // caller passed something malformed
  InvalidUsage = 5,     // caller used the API out of order / beyond limits
  RemoteError = 6,      // the peer went away or sent garbage
};

inline bool ok(Status s) { return s == Status::Ok; }
const char* toString(Status s);

}  // namespace icn

#define ICN_CHECK(expr)                           \
  do {                                            \
    ::icn::Status icn_st_ = (expr);               \
    if (icn_st_ != ::icn::Status::Ok) return icn_st_; \
  } while (0)
