// A histogram of waits that one thread fills and any thread reads: cumulative relaxed counters in log-spaced
// buckets (8 per power of two from 1 us to 2^32 us, one for waits under 1 us), so a reader takes the difference
// of two reads as the histogram of a period, and its quantiles are exact to within a bucket (12.5%).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>

namespace icn::diagnose {

class WaitHistogram {
 public:
  static constexpr int kSub = 8;  // buckets per power of two
  static constexpr int kBuckets = 1 + kSub * 32;

  struct Counts {
    std::array<uint64_t, kBuckets> n{};
    uint64_t total = 0;  // the buckets' sum
    uint64_t sumNs = 0;
    Counts& operator+=(const Counts& o);
    Counts operator-(const Counts& o) const;  // o must be an earlier read of the same histogram
    double quantileS(double q) const;          // 0 when empty
    double meanS() const { return total ? static_cast<double>(sumNs) * 1e-9 / static_cast<double>(total) : 0; }
  };

  void add(uint64_t waitNs);
  Counts read() const;

  static int bucketOf(uint64_t waitNs);
  static double bucketLowS(int b);   // bucket b holds waits in [low, high)
  static double bucketHighS(int b);

 private:
  std::array<std::atomic<uint64_t>, kBuckets> n_{};
  std::atomic<uint64_t> sumNs_{0};
};

}  // namespace icn::diagnose
