#include "transport/ib/ib_wire.h"

#include <cstring>

namespace icn::ib {

uint32_t encodeImm(const Imm& imm) {
  return (imm.slot & 31u) | (imm.sub & 7u) << 5 | ((imm.nchunks - 1) & 15u) << 8 | (imm.chunk & 15u) << 12 |
         (imm.seq & kImmSeqMask) << 16;
}

Imm decodeImm(uint32_t v) {
  Imm i;
  i.slot = v & 31u;
  i.sub = (v >> 5) & 7u;
  i.nchunks = ((v >> 8) & 15u) + 1;
  i.chunk = (v >> 12) & 15u;
  i.seq = v >> 16;
  return i;
}

int splitMessage(uint64_t size, int nqps, uint64_t offsets[kMaxQps], uint64_t lengths[kMaxQps]) {
  if (nqps < 1) nqps = 1;
  if (nqps > kMaxQps) nqps = kMaxQps;
  uint64_t want = (size + kMinChunk - 1) / kMinChunk;
  int n = int(want < uint64_t(nqps) ? (want ? want : 1) : nqps);
  uint64_t chunk = (size + n - 1) / n;
  chunk = (chunk + 127) & ~uint64_t(127);
  if (chunk == 0) chunk = size;
  int out = 0;
  uint64_t off = 0;
  do {
    uint64_t len = size - off < chunk ? size - off : chunk;
    offsets[out] = off;
    lengths[out] = len;
    off += len;
    ++out;
  } while (off < size && out < n);
  if (off < size) lengths[out - 1] += size - off;  // cannot happen with the rounding above; keep it total
  return out;
}

namespace {
struct Writer {
  std::vector<uint8_t> v;
  template <class T> void put(T x) {
    uint8_t b[sizeof(T)];
    memcpy(b, &x, sizeof(T));
    v.insert(v.end(), b, b + sizeof(T));
  }
  void bytes(const uint8_t* p, size_t n) { v.insert(v.end(), p, p + n); }
};
struct Reader {
  std::span<const uint8_t> s;
  size_t off = 0;
  bool ok = true;
  template <class T> T get() {
    T x{};
    if (off + sizeof(T) > s.size()) { ok = false; return x; }
    memcpy(&x, s.data() + off, sizeof(T));
    off += sizeof(T);
    return x;
  }
  void bytes(uint8_t* p, size_t n) {
    if (off + n > s.size()) { ok = false; return; }
    memcpy(p, s.data() + off, n);
    off += n;
  }
};
}  // namespace

// Layout: version u8 | ndevs u8 | nqps u8 | pad u8 | ndevs x (gid[16] lid u16 eth u8 mtu u8) |
//         nqps x qpn u32 | fifoAddr u64 | 4 x rkey u32 | flushAddr u64   (little endian, x86/arm hosts)
std::vector<uint8_t> encodeBlob(const ConnBlob& b) {
  Writer w;
  w.put<uint8_t>(kBlobVersion);
  w.put<uint8_t>(uint8_t(b.devs.size()));
  w.put<uint8_t>(uint8_t(b.qpns.size()));
  w.put<uint8_t>(0);
  for (const auto& d : b.devs) {
    w.bytes(d.gid.data(), 16);
    w.put(d.lid);
    w.put(d.ethernet);
    w.put(d.mtu);
  }
  for (uint32_t q : b.qpns) w.put(q);
  w.put(b.fifoAddr);
  for (uint32_t k : b.fifoRkeys) w.put(k);
  w.put(b.flushAddr);
  return std::move(w.v);
}

Status decodeBlob(std::span<const uint8_t> bytes, ConnBlob* out, std::string* why) {
  Reader r{bytes};
  ConnBlob b;
  uint8_t ver = r.get<uint8_t>(), ndevs = r.get<uint8_t>(), nqps = r.get<uint8_t>();
  r.get<uint8_t>();
  auto bad = [&](const std::string& s) { if (why) *why = "bad ib connection blob: " + s; return Status::RemoteError; };
  if (!r.ok) return bad("truncated header");
  if (ver != kBlobVersion) return bad("version " + std::to_string(ver) + ", expected " + std::to_string(kBlobVersion));
  if (ndevs < 1 || ndevs > kMaxVDevMembers) return bad(std::to_string(ndevs) + " devices");
  if (nqps < ndevs || nqps > kMaxQps) return bad(std::to_string(nqps) + " QPs for " + std::to_string(ndevs) + " devices");
  for (int i = 0; i < ndevs; ++i) {
    DevAddr d;
    r.bytes(d.gid.data(), 16);
    d.lid = r.get<uint16_t>();
    d.ethernet = r.get<uint8_t>();
    d.mtu = r.get<uint8_t>();
    if (d.mtu < 1 || d.mtu > 5) return bad("path MTU code " + std::to_string(d.mtu));
    b.devs.push_back(d);
  }
  for (int i = 0; i < nqps; ++i) b.qpns.push_back(r.get<uint32_t>());
  b.fifoAddr = r.get<uint64_t>();
  for (auto& k : b.fifoRkeys) k = r.get<uint32_t>();
  b.flushAddr = r.get<uint64_t>();
  if (!r.ok) return bad("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (r.off != bytes.size()) return bad("trailing bytes");
  *out = std::move(b);
  return Status::Ok;
}

// Layout: type u8 | link u8 | report: nextSeq u32 | count u8 | count x (slot u8 nsub u8 seq u32 nsub x u16)
//                            | rejoin, accept: offer u32 | count u8 | count x qpn u32
//                            | refuse: offer u32
namespace {
bool carriesOffer(NoteType t) { return t == NoteType::Rejoin || t == NoteType::Accept || t == NoteType::Refuse; }
}  // namespace

std::vector<uint8_t> encodeNote(const FailoverNote& n) {
  Writer w;
  w.put(uint8_t(n.type));
  w.put(n.link);
  if (carriesOffer(n.type)) w.put(n.offer);
  if (n.type == NoteType::Rejoin || n.type == NoteType::Accept) {
    w.put(uint8_t(n.qpns.size()));
    for (uint32_t q : n.qpns) w.put(q);
    return std::move(w.v);
  }
  if (n.type != NoteType::Report) return std::move(w.v);
  w.put(n.nextSeq);
  w.put(uint8_t(n.pending.size()));
  for (const PendingRecv& p : n.pending) {
    w.put(p.slot);
    w.put(p.nsub);
    w.put(p.seq);
    for (int i = 0; i < p.nsub; ++i) w.put(p.have[i]);
  }
  return std::move(w.v);
}

Status decodeNote(std::span<const uint8_t> bytes, FailoverNote* out, std::string* why) {
  Reader r{bytes};
  FailoverNote n;
  auto bad = [&](const std::string& s) { if (why) *why = "bad failover note: " + s; return Status::RemoteError; };
  const uint8_t type = r.get<uint8_t>();
  n.link = r.get<uint8_t>();
  if (!r.ok) return bad("truncated");
  if (type < uint8_t(NoteType::Fence) || type > uint8_t(NoteType::Refuse)) return bad("type " + std::to_string(type));
  n.type = NoteType(type);
  if (n.link >= kMaxVDevMembers) return bad("link " + std::to_string(n.link));
  if (carriesOffer(n.type)) n.offer = r.get<uint32_t>();
  if (n.type == NoteType::Rejoin || n.type == NoteType::Accept) {
    const uint8_t count = r.get<uint8_t>();
    if (count < 1 || count > kMaxQps) return bad(std::to_string(count) + " QPs");
    for (int i = 0; i < count; ++i) n.qpns.push_back(r.get<uint32_t>());
  }
  if (n.type == NoteType::Report) {
    n.nextSeq = r.get<uint32_t>();
    const uint8_t count = r.get<uint8_t>();
    if (count > kFifoSlots) return bad(std::to_string(count) + " pending receives");
    uint32_t seen = 0;
    for (int i = 0; i < count && r.ok; ++i) {
      PendingRecv p;
      p.slot = r.get<uint8_t>();
      p.nsub = r.get<uint8_t>();
      p.seq = r.get<uint32_t>();
      if (p.slot >= kFifoSlots || (seen & (1u << p.slot))) return bad("slot " + std::to_string(p.slot));
      if (p.nsub < 1 || p.nsub > kMaxRecvs) return bad(std::to_string(p.nsub) + " sub-requests");
      if (p.seq % kFifoSlots != p.slot)
        return bad("sequence " + std::to_string(p.seq) + " in slot " + std::to_string(p.slot));
      seen |= 1u << p.slot;
      for (int k = 0; k < p.nsub; ++k) p.have[k] = r.get<uint16_t>();
      n.pending.push_back(p);
    }
  }
  if (!r.ok) return bad("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (r.off != bytes.size()) return bad("trailing bytes");
  *out = std::move(n);
  return Status::Ok;
}

}  // namespace icn::ib
