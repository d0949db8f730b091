#include <gtest/gtest.h>

#include "transport/ib/ib_gdr.h"
#include "transport/ib/ib_wire.h"

using namespace icn::ib;
static const std::string kFix = ICN_IB_FIXTURES;

TEST(IbWire, ImmediateRoundTripsEveryField) {
  for (uint32_t slot : {0u, 17u, 31u})
    for (uint32_t sub : {0u, 7u})
      for (uint32_t n : {1u, 16u})
        for (uint32_t seq : {0u, 12345u, kImmSeqMask})
          for (uint32_t chunk : {0u, 9u, 15u}) {
            Imm i = decodeImm(encodeImm({slot, sub, n, seq, chunk}));
            EXPECT_EQ(i.slot, slot);
            EXPECT_EQ(i.sub, sub);
            EXPECT_EQ(i.nchunks, n);
            EXPECT_EQ(i.seq, seq);
            EXPECT_EQ(i.chunk, chunk);
          }
  EXPECT_EQ(decodeImm(encodeImm({0, 0, 1, kImmSeqMask + 5})).seq, 4u) << "sequence wraps in 16 bits";
}

TEST(IbWire, SplitKeepsSmallMessagesWholeAndCoversLargeOnes) {
  uint64_t off[kMaxQps], len[kMaxQps];
  EXPECT_EQ(splitMessage(0, 4, off, len), 1);
  EXPECT_EQ(len[0], 0u);
  EXPECT_EQ(splitMessage(1000, 4, off, len), 1);
  EXPECT_EQ(len[0], 1000u);
  ASSERT_EQ(splitMessage(1 << 20, 4, off, len), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(len[i], 256u * 1024);
  EXPECT_EQ(off[3], 768u * 1024);
  for (uint64_t size : {uint64_t(3 * kMinChunk + 1), uint64_t(1) << 30, uint64_t(5 * kMinChunk - 3)}) {
    for (int q : {1, 2, 3, 16}) {
      int n = splitMessage(size, q, off, len);
      ASSERT_GE(n, 1);
      ASSERT_LE(n, q);
      uint64_t total = 0;
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(off[i], total);
        if (i + 1 < n) { EXPECT_EQ(len[i] % 128, 0u); }
        total += len[i];
      }
      EXPECT_EQ(total, size) << "size " << size << " qps " << q;
    }
  }
  EXPECT_EQ(splitMessage(1 << 20, 0, off, len), 1) << "nqps clamped to >= 1";
}

TEST(IbWire, BlobRoundTripAndRejectsGarbage) {
  ConnBlob b;
  DevAddr d;
  d.gid[0] = 0xfe;
  d.gid[15] = 7;
  d.lid = 0x12;
  d.ethernet = 1;
  d.mtu = 5;
  b.devs = {d, d};
  b.qpns = {11, 12, 13, 14};
  b.fifoAddr = 0x123456789abcull;
  b.fifoRkeys = {1, 2, 0, 0};
  auto bytes = encodeBlob(b);
  ConnBlob o;
  std::string why;
  ASSERT_EQ(decodeBlob(bytes, &o, &why), icn::Status::Ok) << why;
  EXPECT_EQ(o.devs.size(), 2u);
  EXPECT_EQ(o.devs[1].gid, d.gid);
  EXPECT_EQ(o.devs[0].lid, 0x12);
  EXPECT_EQ(o.qpns, b.qpns);
  EXPECT_EQ(o.fifoAddr, b.fifoAddr);
  EXPECT_EQ(o.fifoRkeys[1], 2u);

  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_NE(decodeBlob(std::span(bytes.data(), cut), &o, &why), icn::Status::Ok) << cut;
  }
  auto bad = bytes;
  bad[0] = 9;
  EXPECT_EQ(decodeBlob(bad, &o, &why), icn::Status::RemoteError);
  EXPECT_NE(why.find("version"), std::string::npos);
  bad = bytes;
  bad[2] = 1;  // fewer QPs than devices
  EXPECT_EQ(decodeBlob(bad, &o, &why), icn::Status::RemoteError);
  bad = bytes;
  bad.push_back(0);
  EXPECT_EQ(decodeBlob(bad, &o, &why), icn::Status::RemoteError);
}

TEST(IbGdr, DecisionCoversEveryMode) {
  GdrProbe p;
  auto d = decideGdr(p);
  EXPECT_EQ(d.mode, GdrMode::None);
  EXPECT_EQ(d.ptrSupport, icn::kMemHost);
  EXPECT_NE(d.why.find("no CUDA driver"), std::string::npos);

  p.cudaDriver = true;
  p.verbsDmabufNote = "ibv_reg_dmabuf_mr: Operation not supported";
  d = decideGdr(p);
  EXPECT_EQ(d.mode, GdrMode::None);
  EXPECT_EQ(d.why, "nvidia_peermem not loaded, CUDA driver lacks dma-buf support");
  p.cudaDmabuf = true;
  d = decideGdr(p);
  EXPECT_EQ(d.mode, GdrMode::None);
  EXPECT_NE(d.why.find("Operation not supported"), std::string::npos) << d.why;

  p.peermem = true;
  p.peermemWhich = "nvidia_peermem";
  d = decideGdr(p);
  EXPECT_EQ(d.mode, GdrMode::Peermem);
  EXPECT_EQ(d.ptrSupport, icn::kMemHost | icn::kMemCuda) << "no DMABUF bit without a working dma-buf path";

  p.verbsDmabuf = true;
  d = decideGdr(p);
  EXPECT_EQ(d.mode, GdrMode::DmaBuf);
  EXPECT_EQ(d.ptrSupport, icn::kMemHost | icn::kMemCuda | icn::kMemDmabuf);
  EXPECT_TRUE(d.peermemToo);
}

TEST(IbGdr, PeermemProbeReadsSysModule) {
  std::string which;
  EXPECT_TRUE(peermemLoaded(kFix + "/nvidia-peermem", &which));
  EXPECT_EQ(which, "nvidia_peermem");
  EXPECT_FALSE(peermemLoaded(kFix + "/rxe-vm", &which));
}

TEST(IbGdr, FlushOnlyForGpuMemoryWithGdr) {
  EXPECT_TRUE(flushNeeded(GdrMode::DmaBuf, icn::kMemCuda, false));
  EXPECT_TRUE(flushNeeded(GdrMode::Peermem, icn::kMemCuda, false));
  EXPECT_FALSE(flushNeeded(GdrMode::Peermem, icn::kMemCuda, true)) << "ICN_GDR_FLUSH_DISABLE";
  EXPECT_FALSE(flushNeeded(GdrMode::DmaBuf, icn::kMemHost, false));
  EXPECT_FALSE(flushNeeded(GdrMode::None, icn::kMemCuda, false));
}
