// Reads of /sys and /proc through a root prefix, so tests can point a reader at a recorded tree. The one sysfs
// reader of the project: the topology probe, the ibverbs device scan and the NIC/tuner-key probes use it.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace icn {

class SysRoot {
 public:
  explicit SysRoot(std::string root = "/");  // "" means "/"
  const std::string& root() const { return root_; }
  std::string path(const std::string& abs) const;  // root + absolute path
  // First line (trailing newline, carriage return and spaces removed); nullopt when missing/unreadable/empty.
  // sysfs answers some reads with an error (EINVAL for an unset gid_attrs entry): that reads as missing.
  std::optional<std::string> line(const std::string& abs) const;
  std::optional<std::string> text(const std::string& abs, size_t maxBytes = 1 << 16) const;
  std::optional<long long> integer(const std::string& abs) const;
  std::optional<std::vector<unsigned char>> bytes(const std::string& abs, size_t maxBytes) const;
  bool exists(const std::string& abs) const;
  std::vector<std::string> list(const std::string& absDir) const;  // sorted, without . and ..
  // The path with every link resolved, as the host sees it (the root prefix removed); nullopt when it does not
  // exist or leads outside the root.
  std::optional<std::string> resolve(const std::string& abs) const;

 private:
  std::string root_;
};

}  // namespace icn
