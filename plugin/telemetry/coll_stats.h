// Measured GPU times per (collective, log2 size bucket, algorithm, protocol, channels) for one communicator rank.
// Fixed capacity, no allocation after construction; one mutex per table (the proxy thread adds, the snapshot
// thread reads; tables of different communicators never share a lock).
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

namespace icn::telemetry {

struct CollKey {
  int8_t coll = -1, algo = -1, proto = -1;
  uint8_t bucket = 0;
  uint8_t channels = 0;
  bool operator==(const CollKey&) const = default;
};

struct CollSummary {
  CollKey key;
  uint64_t count = 0;
  double meanUs = 0, minUs = 0, p50Us = 0;
  double sumUs = 0;
  // Geometric mean of bytes/us over the calls that came with a size (bwCount of them); 0 when none did.
  double gmBytesPerUs = 0;
  uint64_t bwCount = 0;
};

class CollStatsTable {
 public:
  static constexpr size_t kCapacity = 512;
  static constexpr size_t kRecent = 32;  // samples kept per key for the median

  // False when the table is full and the key is new (the sample is dropped and counted).
  // bytes (0: unknown) feeds the bandwidth mean.
  bool add(const CollKey& key, double us, uint64_t bytes = 0);
  std::vector<CollSummary> summaries() const;
  uint64_t dropped() const;

 private:
  struct Slot {
    bool used = false;
    CollKey key;
    uint64_t count = 0;
    double sumUs = 0, minUs = 0;
    double sumLogBw = 0;
    uint64_t bwCount = 0;
    std::array<float, kRecent> recent{};
  };
  mutable std::mutex mu_;
  std::array<Slot, kCapacity> slots_{};
  uint64_t dropped_ = 0;
};

}  // namespace icn::telemetry
