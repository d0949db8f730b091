// Fixed-capacity object pool: every request a comm can have in flight is allocated once, up front,
// so the data path never allocates. Not thread-safe: one comm is driven by one thread at a time.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace icn {

template <typename T, size_t N>
class FixedPool {
 public:
  FixedPool() {
    for (size_t i = 0; i < N; i++) free_[i] = static_cast<uint16_t>(N - 1 - i);
    nfree_ = N;
  }
  T* acquire() {
    if (nfree_ == 0) return nullptr;
    return &items_[free_[--nfree_]];
  }
  void release(T* t) { free_[nfree_++] = static_cast<uint16_t>(t - items_.data()); }
  size_t inUse() const { return N - nfree_; }
  static constexpr size_t capacity() { return N; }
  template <typename F>
  void forEach(F&& f) {
    for (auto& item : items_) f(item);
  }
  bool owns(const T* t) const { return t >= items_.data() && t < items_.data() + N; }
  // Slot numbers, for transports that name a request on the wire (the peer's number is checked: i < N).
  size_t indexOf(const T* t) const { return static_cast<size_t>(t - items_.data()); }
  T& at(size_t i) { return items_[i]; }
  const T& at(size_t i) const { return items_[i]; }

 private:
  std::array<T, N> items_{};
  std::array<uint16_t, N> free_{};
  size_t nfree_ = 0;
};

}  // namespace icn
