// A wire format's fingerprint: FNV-1a over the values both ends must agree on (constants, record sizes, field
// offsets). Each wire header defines its fingerprint next to its version, and test/unit/wire_version_test.cc
// records the fingerprint of each version: a constant changed without a version bump fails there, before two
// builds that disagree meet on a network.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace icn {

constexpr uint64_t wireFingerprint(std::initializer_list<uint64_t> values) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t v : values)
    for (int i = 0; i < 8; i++) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  return h;
}

}  // namespace icn
