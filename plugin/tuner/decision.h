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

// "RING/LL128/ch8", "RING/LL128", "default"; buf must hold 48 bytes.
const char* describe(const Decision& d, char* buf, unsigned long size);

}  // namespace icn::tuner
