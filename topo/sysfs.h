// Reads of /sys and /proc through a root prefix, so tests can point the probe at a recorded tree.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace icn::topo {

class SysRoot {
 public:
  explicit SysRoot(std::string root = "/");
  const std::string& root() const { return root_; }
  std::string path(const std::string& abs) const;  // root + absolute path
  // First line (trailing newline removed); nullopt when missing/unreadable/empty.
  std::optional<std::string> line(const std::string& abs) const;
  std::optional<std::string> text(const std::string& abs, size_t maxBytes = 1 << 16) const;
  std::optional<long long> integer(const std::string& abs) const;
  std::optional<std::vector<unsigned char>> bytes(const std::string& abs, size_t maxBytes) const;
  bool exists(const std::string& abs) const;
  std::vector<std::string> list(const std::string& absDir) const;  // sorted, without . and ..

 private:
  std::string root_;
};

// "16.0 GT/s PCIe" / "8 GT/s" / "Unknown" -> GT/s (0 when unknown).
double parseLinkSpeed(const std::string& s);

}  // namespace icn::topo
