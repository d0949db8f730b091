// NCCL-style interface list: "eth,ib" prefixes, "^docker" excludes, "=eth0" exact names (both combine: "^=lo").
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace icn {

class IfaceFilter {
 public:
  explicit IfaceFilter(std::string_view spec);
  bool matches(std::string_view name) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> items_;
};

}  // namespace icn
