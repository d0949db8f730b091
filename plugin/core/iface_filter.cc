#include "core/iface_filter.h"

namespace icn {

IfaceFilter::IfaceFilter(std::string_view spec) {
  if (!spec.empty() && spec.front() == '^') {
    exclude_ = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    exact_ = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    if (!item.empty()) items_.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
}

bool IfaceFilter::matches(std::string_view name) const {
  bool hit = false;
  for (const auto& it : items_) {
    if (exact_ ? name == it : name.substr(0, it.size()) == it) {
      hit = true;
      break;
    }
  }
  return exclude_ ? !hit : (items_.empty() || hit);
}

}  // namespace icn
