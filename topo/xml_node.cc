#include "topo/xml_node.h"

namespace icn::topo {

XmlNode& XmlNode::attr(const std::string& k, const std::string& v) {
  attrs.emplace_back(k, xmlSafe(v));
  return *this;
}

XmlNode& XmlNode::add(const std::string& child) {
  subs.push_back(XmlNode{child, {}, {}});
  return subs.back();
}

size_t XmlNode::countNodes() const {
  size_t n = 1;
  for (const XmlNode& s : subs) n += s.countNodes();
  return n;
}

namespace {
void emit(const XmlNode& n, int indent, std::string& out) {
  out.append(static_cast<size_t>(indent), ' ');
  out += "<" + n.name;
  for (const auto& [k, v] : n.attrs) out += " " + k + "=\"" + v + "\"";
  if (n.subs.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const XmlNode& s : n.subs) emit(s, indent + 2, out);
  out.append(static_cast<size_t>(indent), ' ');
  out += "</" + n.name + ">\n";
}
}  // namespace

std::string XmlNode::serialize() const {
  std::string out;
  emit(*this, 0, out);
  return out;
}

std::string xmlSafe(const std::string& v) {
  std::string o;
  for (char c : v) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' || c == '.' ||
              c == '_' || c == ':' || c == '/' || c == '+' || c == '-' || c == ',';
    o += ok ? c : '_';
  }
  if (o.size() > 200) o.resize(200);
  return o;
}

}  // namespace icn::topo
