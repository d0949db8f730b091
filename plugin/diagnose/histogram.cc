#include "diagnose/histogram.h"

#include <algorithm>
#include <cmath>

namespace icn::diagnose {

int WaitHistogram::bucketOf(uint64_t waitNs) {
  const uint64_t us = waitNs / 1000;
  if (us == 0) return 0;
  const int octave = 63 - __builtin_clzll(us);  // us in [2^octave, 2^(octave+1))
  if (octave >= 32) return kBuckets - 1;
  const int sub = octave >= 3 ? static_cast<int>((us >> (octave - 3)) & 7) : static_cast<int>((us << (3 - octave)) & 7);
  return 1 + kSub * octave + sub;
}

double WaitHistogram::bucketLowS(int b) {
  if (b <= 0) return 0;
  const int octave = (b - 1) / kSub, sub = (b - 1) % kSub;
  return std::ldexp(1.0 + sub / static_cast<double>(kSub), octave) * 1e-6;
}

double WaitHistogram::bucketHighS(int b) {
  if (b <= 0) return 1e-6;
  if (b >= kBuckets - 1) return std::ldexp(1.0, 33) * 1e-6;
  return bucketLowS(b + 1);
}

void WaitHistogram::add(uint64_t waitNs) {
  std::atomic<uint64_t>& c = n_[static_cast<size_t>(bucketOf(waitNs))];
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer
  sumNs_.store(sumNs_.load(std::memory_order_relaxed) + waitNs, std::memory_order_relaxed);
}

WaitHistogram::Counts WaitHistogram::read() const {
  // The counters are read one by one while the writer may add. Each only grows, so the total is taken as the
  // buckets' sum: the difference of two reads then counts every sample exactly once.
  Counts c;
  for (size_t b = 0; b < kBuckets; b++) c.total += c.n[b] = n_[b].load(std::memory_order_relaxed);
  c.sumNs = sumNs_.load(std::memory_order_relaxed);
  return c;
}

WaitHistogram::Counts& WaitHistogram::Counts::operator+=(const Counts& o) {
  for (size_t b = 0; b < kBuckets; b++) n[b] += o.n[b];
  total += o.total;
  sumNs += o.sumNs;
  return *this;
}

WaitHistogram::Counts WaitHistogram::Counts::operator-(const Counts& o) const {
  Counts d;
  for (size_t b = 0; b < kBuckets; b++) d.total += d.n[b] = n[b] >= o.n[b] ? n[b] - o.n[b] : 0;
  d.sumNs = sumNs >= o.sumNs ? sumNs - o.sumNs : 0;
  return d;
}

double WaitHistogram::Counts::quantileS(double q) const {
  if (total == 0) return 0;
  // The sample of rank q*(total-1), placed linearly inside its bucket.
  const double target = q * static_cast<double>(total - 1);
  double below = 0;
  for (int b = 0; b < kBuckets; b++) {
    const double in = static_cast<double>(n[static_cast<size_t>(b)]);
    if (in > 0 && target < below + in) {
      if (b == 0) return 0;  // under a microsecond: no wait
      const double frac = (target - below + 0.5) / in;
      return bucketLowS(b) + (bucketHighS(b) - bucketLowS(b)) * frac;
    }
    below += in;
  }
  return bucketLowS(kBuckets - 1);
}

}  // namespace icn::diagnose
