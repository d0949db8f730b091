// Remote access the verbs transport grants: a peer may only write (payload into posted receives, CTS entries into
// the FIFO); RDMA reads are served only by the receiver's flush QP (connected to itself), and only registrations
// the flush reads carry REMOTE_READ. The VM suite (`-L vm`) runs the same code on rxe, flush included.
#include <gtest/gtest.h>

#include "transport/ib/ib_comm.h"
#include "transport/ib/ib_qp.h"

namespace icn::ib {
namespace {

TEST(Access, DataQpsServeWritesOnlyAndTheFlushQpReadsOnly) {
  EXPECT_EQ(qpAccessFlags(QpUse::Data), IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(qpAccessFlags(QpUse::Flush), IBV_ACCESS_REMOTE_READ);
}

TEST(Access, RemoteReadOnlyOnMemoryTheFlushReads) {
  const int base = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING;
  setFlushHostMemoryForTesting(false);
  EXPECT_EQ(mrAccessFlags(base, kMemHost), base & ~IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(mrAccessFlags(base, kMemCuda), base);
  EXPECT_EQ(mrAccessFlags(base, kMemDmabuf), base);
  EXPECT_EQ(mrAccessFlags(IBV_ACCESS_LOCAL_WRITE, kMemCuda), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  setFlushHostMemoryForTesting(true);  // the VM suite flushes host memory too
  EXPECT_EQ(mrAccessFlags(base, kMemHost), base);
  setFlushHostMemoryForTesting(false);
}

}  // namespace
}  // namespace icn::ib
