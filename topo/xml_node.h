// A tiny element tree serialised exactly the way NCCL's own dump writes it (two-space indent, double quotes,
// one space between attributes, "/>" for leaves, no declaration, no tabs), so NCCL's parser accepts it.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace icn::topo {

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlNode> subs;

  XmlNode& attr(const std::string& k, const std::string& v);
  XmlNode& add(const std::string& child);
  size_t countNodes() const;
  std::string serialize() const;
};

// NCCL's parser has no entities: keep values to a safe character set (others become '_').
std::string xmlSafe(const std::string& v);

}  // namespace icn::topo
