// What the tuner decides for one collective call: an algorithm/protocol pair and optionally a channel count.
#pragma once
#include <cstdint>

namespace icn::tuner {

struct Decision {
  int8_t algo = -1;     // -1: leave NCCL's choice
  int8_t proto = -1;    // -1: any protocol of `algo` (NCCL's cheapest)
  int16_t channels = 0; // 0: NCCL's channel count
  bool valid() const { return algo >= 0 || proto >= 0 || channels > 0; }
  bool operator==(const Decision&) const = default;
};

// A decision and the first call it applies to in one atomic word, for lock-free reads on the hot path:
// bit 0 valid | bits 1-4 algo+1 | bits 5-7 proto+1 | bits 8-15 channels | bits 16-63 first call (clamped).
constexpr uint64_t kMaxPackedFrom = (uint64_t{1} << 48) - 1;
inline uint64_t packDecision(const Decision& d, uint64_t from) {
  return 1 | (static_cast<uint64_t>(d.algo + 1) & 0xF) << 1 | (static_cast<uint64_t>(d.proto + 1) & 0x7) << 5 |
         (static_cast<uint64_t>(d.channels) & 0xFF) << 8 | (from < kMaxPackedFrom ? from : kMaxPackedFrom) << 16;
}
inline Decision unpackDecision(uint64_t w) {
  return Decision{static_cast<int8_t>(static_cast<int>((w >> 1) & 0xF) - 1),
                  static_cast<int8_t>(static_cast<int>((w >> 5) & 0x7) - 1), static_cast<int16_t>((w >> 8) & 0xFF)};
}

// "RING/LL128/ch8", "RING/LL128", "default"; buf must hold 48 bytes.
const char* describe(const Decision& d, char* buf, unsigned long size);

}  // namespace icn::tuner
