// The agreement service's wire format (agree/service.h): fixed-layout frames, little-endian integers, bounded
// payloads, and the HMAC proofs both ends of a connection give. Shared by the service and its registry.
#pragma once
#include <arpa/inet.h>
#include <net/if.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/socket.h"
#include "core/wire_fingerprint.h"
#include "tuner/agree/agreement.h"

namespace icn::tuner::agree {

using Clock = std::chrono::steady_clock;
using Token = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, 16>;

// Frame: magic u32 | type u8 | 3 zero bytes | payload length u32 | payload (little-endian integers).
constexpr uint32_t kMagic = 0x49434e41;  // "ICNA"
// The protocol's version: in every proof, the rendezvous file's first line and the derived secrets, so that
// processes speaking another version never get past the handshake.
constexpr uint8_t kProtocol = 3;
enum : uint8_t {
  kChallenge = 1, kHello, kWelcome, kMembers, kStart, kHorizon, kFreeze, kDrop, kBye,
  kRegister, kLookup, kFound,  // the registry (ICN_TUNER_RENDEZVOUS=tcp://host:port)
  kReport,                     // a follower's measurements of one size bucket
  // Two processes claim rank 0 of a communicator (both registered as its leader): the registry tells every client
  // of that communicator (payload: both addresses), and a follower tells its leader (no payload).
  kContested,
  // The diagnosis (plugin/diagnose): a follower's straggler summaries and hang reports for the leader, as JSON in
  // chunks (payload: u8 kind | u8 last | text), one message at a time.
  kDiag,
};
enum : uint8_t { kDiagSummaries = 1, kDiagReport = 2 };
// A diagnosis message's text: a follower sends none longer (a bigger one waits for a smaller period), a leader
// drops a follower that sends more. Half the send queue's bound, so one message never fills it.
constexpr size_t kMaxDiagText = 512 * 1024;
// What each side may send once the handshake is done: anything else is a lie about the protocol.
//   follower -> leader: MEMBERS (once, before any REPORT), REPORT (once per bucket), DROP (once), CONTESTED, DIAG,
//                       BYE
//   leader -> follower: START (once, first), HORIZON, FREEZE, BYE
//   registry client -> registry: REGISTER (a leader, once) or LOOKUP (a follower, once)
//   registry -> client: FOUND, CONTESTED
constexpr size_t kHeader = 12;
constexpr uint32_t kMaxPayload = 4096;
constexpr size_t kMaxQueued = 1 << 20;  // bytes waiting for a slow peer before it is dropped
constexpr size_t kMaxDecisions = (kMaxPayload - 20) / 8;
static_assert(Agreement::kMaxPerMessage <= kMaxDecisions, "an announcement must fit one frame");
static_assert(2 * kMaxDiagText <= kMaxQueued, "a diagnosis message must never fill the send queue");
// What a peer's code assumes of ours: changing any value in this list (or a message's payload layout) changes the
// protocol. Bump kProtocol with it and record the new fingerprint for the new version in
// test/unit/wire_version_test.cc.
constexpr uint64_t kWireFingerprint =
    wireFingerprint({kMagic, kProtocol, kHeader, kMaxPayload, kChallenge, kHello, kWelcome, kMembers, kStart,
                     kHorizon, kFreeze, kDrop, kBye, kRegister, kLookup, kFound, kReport, kContested, kDiag,
                     kDiagSummaries, kDiagReport, kMaxDiagText});
constexpr auto kHandshake = std::chrono::seconds(5);
constexpr auto kConnect = std::chrono::seconds(1);
constexpr auto kLookEvery = std::chrono::milliseconds(2);
// Accepted connections that have not proven the secret yet: at most kMaxPending, kMaxPendingPerSource of them from
// one address. Past either bound the oldest one older than kFloodGrace (time enough for a handshake) makes room,
// so a flood of idle connections never keeps a follower out; a newcomer finding none that old is refused.
constexpr int kMaxPending = 256;
constexpr int kMaxPendingPerSource = 64;
constexpr auto kFloodGrace = std::chrono::milliseconds(100);
constexpr auto kFloodReportEvery = std::chrono::seconds(1);  // WARN about connections dropped unproven ...
constexpr uint64_t kFloodReportAt = 64;                      // ... at once when this many add up
constexpr size_t kMaxAddr = 128;  // an address as text ("[v6%scope]:port")
constexpr size_t kMaxRegistryClients = 4096;  // authenticated registry connections (one per process and comm)
constexpr size_t kMaxContested = 4096;        // communicators the registry remembers as claimed twice
constexpr auto kFileCheckEvery = std::chrono::milliseconds(20);  // a leader re-reads its rendezvous file
// A registry client that could not reach the registry (or was refused) tries again after this long.
constexpr auto kRegistryRetry = std::chrono::milliseconds(20);

struct Writer {
  std::string b;
  void u8(uint8_t v) { b.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(const uint8_t* p, size_t n) { b.append(reinterpret_cast<const char*>(p), n); }
};

struct Reader {
  const uint8_t* p;
  size_t n, off = 0;
  bool ok = true;
  bool need(size_t k) {
    ok = ok && off + k <= n;
    return ok;
  }
  uint8_t u8() { return need(1) ? p[off++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
  void bytes(uint8_t* dst, size_t k) {
    if (!need(k)) return;
    memcpy(dst, p + off, k);
    off += k;
  }
  bool done() const { return ok && off == n; }
};

inline std::string frame(uint8_t type, const std::string& payload) {
  Writer w;
  w.u32(kMagic);
  w.u8(type);
  w.u8(0);
  w.u8(0);
  w.u8(0);
  w.u32(static_cast<uint32_t>(payload.size()));
  return w.b + payload;
}

inline void putDecisions(Writer& w, const std::vector<AgreedDecision>& ds) {
  w.u32(static_cast<uint32_t>(ds.size()));
  for (const AgreedDecision& a : ds) {
    w.u8(static_cast<uint8_t>(a.coll));
    w.u8(static_cast<uint8_t>(a.bucket));
    w.u8(static_cast<uint8_t>(a.d.algo + 1));
    w.u8(static_cast<uint8_t>(a.d.proto + 1));
    w.u32(static_cast<uint32_t>(a.d.channels));
  }
}

inline bool getDecisions(Reader& r, std::vector<AgreedDecision>* out) {
  uint32_t n = r.u32();
  if (!r.ok || n > kMaxDecisions) return false;
  for (uint32_t i = 0; i < n && r.ok; ++i) {
    AgreedDecision a;
    a.coll = r.u8();
    a.bucket = r.u8();
    int algo = static_cast<int>(r.u8()) - 1, proto = static_cast<int>(r.u8()) - 1;
    uint32_t ch = r.u32();
    if (a.coll >= coll::kNumColls || a.bucket >= coll::kNumBuckets || algo >= coll::kNumAlgos ||
        proto >= coll::kNumProtos || ch > 64)
      return false;
    a.d = Decision{static_cast<int8_t>(algo), static_cast<int8_t>(proto), static_cast<int16_t>(ch)};
    out->push_back(a);
  }
  return r.ok;
}

// Payloads of START (with its first call) or HORIZON, and of FREEZE: what a leader tells its followers.
inline std::string announcementPayload(const Agreement::Announcement& m) {
  Writer w;
  if (m.start) w.u64(m.s);
  w.u64(m.h);
  putDecisions(w, m.decisions);
  return w.b;
}

inline std::string freezePayload(const Agreement& a) {
  Writer w;
  w.u64(a.frozenFrom());
  w.u8(a.frozenQuietly() ? 1 : 0);
  return w.b;
}

inline Digest proof(const Token& t, char role, uint64_t commId, const Nonce& nl, const Nonce& nf) {
  Writer w;
  w.u8(kProtocol);
  w.u8(static_cast<uint8_t>(role));
  w.u64(commId);
  w.bytes(nl.data(), nl.size());
  w.bytes(nf.data(), nf.size());
  auto* m = reinterpret_cast<const uint8_t*>(w.b.data());
  return hmacSha256(std::span<const uint8_t>(t.data(), t.size()), std::span<const uint8_t>(m, w.b.size()));
}

inline bool sameDigest(const Digest& a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

inline std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

inline bool unhex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int v = 0;
    for (int j = 0; j < 2; ++j) {
      char c = s[2 * i + j];
      int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (x < 0) return false;
      v = v * 16 + x;
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

inline bool parseAddr(const std::string& s, SockAddr* a) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = s.substr(0, colon);
  int port = atoi(s.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  *a = SockAddr{};
  if (!host.empty() && host.front() == '[' && host.back() == ']') {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a->storage);
    std::string h = host.substr(1, host.size() - 2);
    std::string scope;
    if (size_t pct = h.find('%'); pct != std::string::npos) {
      scope = h.substr(pct + 1);
      h = h.substr(0, pct);
    }
    if (inet_pton(AF_INET6, h.c_str(), &in6->sin6_addr) != 1) return false;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    in6->sin6_scope_id = scope.empty() ? 0 : if_nametoindex(scope.c_str());
    a->len = sizeof(sockaddr_in6);
    return true;
  }
  auto* in = reinterpret_cast<sockaddr_in*>(&a->storage);
  if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) return false;
  in->sin_family = AF_INET;
  in->sin_port = htons(static_cast<uint16_t>(port));
  a->len = sizeof(sockaddr_in);
  return true;
}

// A DIAG frame's payload: u8 kind (kDiagSummaries, kDiagReport) | u8 last (1 on a message's last chunk) | n bytes of
// its text.
inline std::string diagPayload(uint8_t kind, bool last, const char* text, size_t n) {
  Writer w;
  w.u8(kind);
  w.u8(last ? 1 : 0);
  w.bytes(reinterpret_cast<const uint8_t*>(text), n);
  return w.b;
}

// A process's report of one (collective, bucket): u8 coll | u8 bucket | u8 arms | per arm: u8 algo | u8 proto |
// u16 usable samples | u32 estimate (IEEE float, microseconds).
inline void putReport(Writer& w, int coll, int bucket, const std::vector<ArmEstimate>& arms) {
  w.u8(static_cast<uint8_t>(coll));
  w.u8(static_cast<uint8_t>(bucket));
  size_t n = std::min<size_t>(arms.size(), BucketExplorer::kMaxArms);
  w.u8(static_cast<uint8_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const ArmEstimate& a = arms[i];
    w.u8(static_cast<uint8_t>(a.d.algo));
    w.u8(static_cast<uint8_t>(a.d.proto));
    w.u8(static_cast<uint8_t>(a.usable));
    w.u8(static_cast<uint8_t>(a.usable >> 8));
    uint32_t bits;
    memcpy(&bits, &a.us, sizeof bits);
    w.u32(bits);
  }
}

// False when the report is malformed: a collective, bucket, algorithm or protocol out of range, more than
// kMaxArms arms, an arm twice, an estimate that is not a finite time under 1000 s, or trailing bytes.
inline bool getReport(Reader& r, int* coll, int* bucket, std::vector<ArmEstimate>* arms) {
  *coll = r.u8();
  *bucket = r.u8();
  uint32_t n = r.u8();
  if (!r.ok || *coll >= coll::kNumColls || *bucket >= coll::kNumBuckets || n > BucketExplorer::kMaxArms) return false;
  std::array<bool, coll::kNumAlgos * coll::kNumProtos> seen{};
  arms->clear();
  for (uint32_t i = 0; i < n; ++i) {
    int algo = r.u8(), proto = r.u8();
    uint16_t usable = static_cast<uint16_t>(r.u8() | (r.u8() << 8));
    uint32_t bits = r.u32();
    float us;
    memcpy(&us, &bits, sizeof us);
    if (!r.ok || algo >= coll::kNumAlgos || proto >= coll::kNumProtos || !(us >= 0 && us < 1e9f)) return false;
    int s = algo * coll::kNumProtos + proto;
    if (seen[s]) return false;
    seen[s] = true;
    arms->push_back(ArmEstimate{Decision{static_cast<int8_t>(algo), static_cast<int8_t>(proto), 0}, us, usable});
  }
  return r.done();
}

// The ranks one process holds (MEMBERS): u32 count | count x u32 rank, increasing.
inline void putRanks(Writer& w, const std::vector<int>& ranks) {
  w.u32(static_cast<uint32_t>(ranks.size()));
  for (int r : ranks) w.u32(static_cast<uint32_t>(r));
}

// False when malformed: no rank, more than Agreement::kMaxLocalRanks, not increasing (a rank twice), trailing bytes.
// Ranges against the communicator are the leader's to check (Agreement::claimRanks).
inline bool getRanks(Reader& r, std::vector<int>* out) {
  uint32_t n = r.u32();
  if (!r.ok || n == 0 || n > static_cast<uint32_t>(Agreement::kMaxLocalRanks)) return false;
  out->clear();
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t v = r.u32();
    if (!r.ok || v > static_cast<uint32_t>(INT32_MAX) || (!out->empty() && static_cast<int>(v) <= out->back()))
      return false;
    out->push_back(static_cast<int>(v));
  }
  return r.done();
}

inline void putAddr(Writer& w, const std::string& a) {
  w.u32(static_cast<uint32_t>(a.size()));
  w.bytes(reinterpret_cast<const uint8_t*>(a.data()), a.size());
}

// An address as text, as it travels; false when too long or not an address.
inline bool getAddr(Reader& r, std::string* out, SockAddr* parsed) {
  uint32_t n = r.u32();
  if (!r.ok || n > kMaxAddr || !r.need(n)) return false;
  out->assign(reinterpret_cast<const char*>(r.p + r.off), n);
  r.off += n;
  return parseAddr(*out, parsed);
}

// A short text as it travels (an address, or a few words where there is none): false when longer than kMaxAddr or
// not printable ASCII (it goes into a log line).
inline bool getText(Reader& r, std::string* out) {
  uint32_t n = r.u32();
  if (!r.ok || n > kMaxAddr || !r.need(n)) return false;
  out->assign(reinterpret_cast<const char*>(r.p + r.off), n);
  r.off += n;
  for (char ch : *out)
    if (ch < 0x20 || ch > 0x7e) return false;
  return true;
}

// Secrets of a network rendezvous, derived from the job key (ICN_AUTH_KEY): every process of the job computes the
// same ones, and nobody without the key can. Only used when auth::enabled().
constexpr const char* kRegistryLabel = "icn-agree-registry 3";
constexpr const char* kCommLabel = "icn-agree-comm 3";
// What the job key signs for one secret: label, NUL, commId, nRanks.
inline std::string derivation(const char* label, uint64_t commId, uint32_t nRanks) {
  Writer w;
  w.bytes(reinterpret_cast<const uint8_t*>(label), strlen(label) + 1);
  w.u64(commId);
  w.u32(nRanks);
  return w.b;
}
inline Token derivedToken(const char* label, uint64_t commId, uint32_t nRanks) {
  std::string m = derivation(label, commId, nRanks);
  Digest d = auth::tag(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(m.data()), m.size()));
  Token t;
  memcpy(t.data(), d.data(), t.size());
  return t;
}
inline Token registryToken() { return derivedToken(kRegistryLabel, 0, 0); }
inline Token commToken(uint64_t commId, int nRanks) {
  return derivedToken(kCommLabel, commId, static_cast<uint32_t>(nRanks));
}

}  // namespace icn::tuner::agree
