// Little-endian byte writer/reader for the handshake wire format; the reader never reads past the end.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace icn {

class WireWriter {
 public:
  template <typename T>
  void put(T v) {
    for (size_t i = 0; i < sizeof(T); i++) buf_.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
  }
  void bytes(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
  std::vector<uint8_t>& buffer() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> data) : data_(data) {}
  template <typename T>
  bool get(T* v) {
    if (data_.size() - off_ < sizeof(T)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); i++) x |= uint64_t(data_[off_ + i]) << (8 * i);
    off_ += sizeof(T);
    *v = static_cast<T>(x);
    return true;
  }
  bool bytes(size_t n, std::span<const uint8_t>* out) {
    if (data_.size() - off_ < n) return false;
    *out = data_.subspan(off_, n);
    off_ += n;
    return true;
  }
  bool atEnd() const { return off_ == data_.size(); }

 private:
  std::span<const uint8_t> data_;
  size_t off_ = 0;
};

}  // namespace icn
