#include "nccl_xml_validator.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <vector>

namespace icn::topo::test {
namespace {

constexpr size_t kMaxStrLen = 255;  // NCCL's MAX_STR_LEN: a value may hold 253 chars (quote + NUL)
constexpr int kMaxAttrs = 16;
constexpr int kMaxSubs = 128;

struct Node {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<std::unique_ptr<Node>> subs;
  const std::string* get(const std::string& k) const {
    for (const auto& [key, v] : attrs)
      if (key == k) return &v;
    return nullptr;
  }
};

struct Parser {
  const std::string& s;
  size_t i = 0;
  size_t nodes = 0;
  std::string err;
  bool fail(const std::string& e) {
    if (err.empty()) err = "offset " + std::to_string(i) + ": " + e;
    return false;
  }
  // NCCL skips only ' ', '\n', '\r' between elements.
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r')) i++;
  }
  bool name(std::string& out) {
    size_t st = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '>' && s[i] != '/' && s[i] != '\n' && s[i] != '\r' && s[i] != '=')
      i++;
    out = s.substr(st, i - st);
    if (out.empty()) return fail("empty name");
    if (out.size() >= kMaxStrLen) return fail("name too long");
    for (char c : out)
      if (!isalnum(static_cast<unsigned char>(c)) && c != '_') return fail("bad character in name '" + out + "'");
    return true;
  }
  bool element(Node& n) {
    if (i >= s.size() || s[i] != '<') return fail(i < s.size() && s[i] == '\t' ? "tab between elements" : "expected '<'");
    i++;
    if (!name(n.name)) return false;
    nodes++;
    while (i < s.size() && s[i] == ' ') {
      i++;
      std::string k;
      if (!name(k)) return fail("attribute expected after a space (NCCL would read an empty attribute)");
      if (i >= s.size() || s[i] != '=') return fail("expected '=' after " + k);
      i++;
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) return fail("attribute value must be quoted");
      char q = s[i++];
      size_t end = s.find(q, i);
      if (end == std::string::npos) return fail("unterminated value");
      std::string v = s.substr(i, end - i);
      if (v.size() > kMaxStrLen - 2) return fail("value of " + k + " longer than NCCL reads");
      if (v.find_first_of("<>\n\r\t") != std::string::npos) return fail("control or markup character in value of " + k);
      i = end + 1;
      if (n.get(k)) return fail("duplicate attribute " + k);
      n.attrs.emplace_back(k, v);
      if (static_cast<int>(n.attrs.size()) > kMaxAttrs) return fail("more than 16 attributes on " + n.name);
    }
    if (i < s.size() && s[i] == '/') {
      i++;
      if (i >= s.size() || s[i] != '>') return fail("expected '>' after '/'");
      i++;
      return true;
    }
    if (i >= s.size() || s[i] != '>') return fail("expected '>' in <" + n.name + ">");
    i++;
    while (true) {
      ws();
      if (i >= s.size()) return fail("unterminated <" + n.name + ">");
      if (s.compare(i, 2, "</") == 0) {
        i += 2;
        std::string closing;
        if (!name(closing)) return false;
        if (closing != n.name) return fail("mismatched </" + closing + "> for <" + n.name + ">");
        if (i >= s.size() || s[i] != '>') return fail("expected '>' in closing tag");
        i++;
        return true;
      }
      auto child = std::make_unique<Node>();
      if (!element(*child)) return false;
      n.subs.push_back(std::move(child));
      if (static_cast<int>(n.subs.size()) > kMaxSubs) return fail("more than 128 children under " + n.name);
    }
  }
};

bool isInt(const std::string* v, long lo = LONG_MIN) {
  if (!v || v->empty()) return false;
  char* end = nullptr;
  long x = strtol(v->c_str(), &end, 0);
  return *end == '\0' && x >= lo;
}

bool parseDoc(const std::string& text, Node& root, XmlCheck& r, size_t maxNodes) {
  if (text.find('\t') != std::string::npos) {
    r.error = "tab character";
    return false;
  }
  Parser p{text, 0, 0, {}};
  p.ws();
  if (!p.element(root)) {
    r.error = p.err;
    return false;
  }
  p.ws();
  if (p.i != text.size()) {
    r.error = "trailing content after the root element";
    return false;
  }
  r.nodes = p.nodes;
  if (p.nodes > maxNodes) {
    r.error = std::to_string(p.nodes) + " nodes exceed NCCL's limit of " + std::to_string(maxNodes);
    return false;
  }
  return true;
}

const std::regex kBusId("^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
const std::regex kClass("^0x[0-9a-f]{6}$");
const std::regex kMask("^[0-9a-f]{8}(,[0-9a-f]{8})*$");
const std::set<std::string> kSpeeds = {"", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe",
                                       "32.0 GT/s PCIe", "64.0 GT/s PCIe"};

struct TopoCheck {
  std::string err;
  std::set<std::string> busids;
  bool fail(const std::string& e) {
    if (err.empty()) err = e;
    return false;
  }
  bool check(const Node& n, const std::string& parent) {
    static const std::map<std::string, std::set<std::string>> allowed = {
        {"system", {"cpu"}}, {"cpu", {"pci", "nic"}}, {"pci", {"pci", "gpu", "nic", "pcilink"}},
        {"gpu", {"nvlink", "c2c"}}, {"nic", {"net"}}, {"net", {}}, {"nvlink", {}}, {"c2c", {}}, {"pcilink", {}}};
    auto it = allowed.find(parent);
    if (it == allowed.end() || !it->second.count(n.name)) return fail("<" + n.name + "> not allowed under <" + parent + ">");
    if (n.name == "cpu") {
      if (!isInt(n.get("numaid"), -1)) return fail("cpu without integer numaid");
      if (auto a = n.get("affinity"); a && !std::regex_match(*a, kMask)) return fail("bad cpu affinity " + *a);
      if (auto a = n.get("arch"); a && *a != "x86_64" && *a != "arm64" && *a != "ppc64") return fail("bad arch " + *a);
    } else if (n.name == "pci") {
      auto b = n.get("busid");
      if (!b || !std::regex_match(*b, kBusId)) return fail("pci busid not lower-case 12 chars: " + (b ? *b : "(none)"));
      if (!busids.insert(*b).second) return fail("duplicate pci busid " + *b);
      auto c = n.get("class");
      if (!c || !std::regex_match(*c, kClass)) return fail("pci " + *b + " without a 0x-6-digit class");
      auto ls = n.get("link_speed");
      if (!ls || !kSpeeds.count(*ls)) return fail("pci " + *b + " link_speed not one NCCL knows");
      auto lw = n.get("link_width");
      if (!lw || (!lw->empty() && !isInt(lw, 1))) return fail("pci " + *b + " bad link_width");
    } else if (n.name == "gpu") {
      if (!isInt(n.get("dev"), 0)) return fail("gpu without dev");
      if (auto sm = n.get("sm"); sm && !isInt(sm, 1)) return fail("gpu bad sm");
    } else if (n.name == "nvlink") {
      auto t = n.get("target");
      if (!t || !std::regex_match(*t, kBusId)) return fail("nvlink target not a bus id");
      if (!isInt(n.get("count"), 1)) return fail("nvlink without positive count");
      auto tc = n.get("tclass");
      if (!tc || (tc->rfind("0x03", 0) != 0 && *tc != "0x068000" && *tc != "0x068001")) return fail("nvlink bad tclass");
    } else if (n.name == "net") {
      auto nm = n.get("name");
      if (!nm || nm->empty()) return fail("net without name");
    }
    for (const auto& s : n.subs)
      if (!check(*s, n.name)) return false;
    return true;
  }
};

}  // namespace

XmlCheck validateNcclTopology(const std::string& text) {
  XmlCheck r;
  Node root;
  if (!parseDoc(text, root, r, 256)) return r;
  if (root.name != "system") {
    r.error = "root element is not <system>";
    return r;
  }
  auto v = root.get("version");
  if (!v || *v != "1") {
    r.error = "system version is not \"1\"";
    return r;
  }
  TopoCheck c;
  for (const auto& s : root.subs)
    if (!c.check(*s, "system")) {
      r.error = c.err;
      return r;
    }
  r.ok = true;
  return r;
}

XmlCheck validateNcclGraph(const std::string& text) {
  XmlCheck r;
  Node root;
  if (!parseDoc(text, root, r, 4096)) return r;
  if (root.name != "graphs" || !root.get("version") || *root.get("version") != "1") {
    r.error = "root must be <graphs version=\"1\">";
    return r;
  }
  static const std::set<std::string> types = {"LOC", "NVL", "NVB", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"};
  for (const auto& g : root.subs) {
    if (g->name != "graph") {
      r.error = "<" + g->name + "> under <graphs>";
      return r;
    }
    for (const char* k : {"id", "pattern", "crossnic", "nchannels", "samechannels"})
      if (!isInt(g->get(k), 0)) {
        r.error = std::string("graph attribute ") + k + " missing or not an integer";
        return r;
      }
    for (const char* k : {"speedintra", "speedinter", "latencyinter"}) {
      auto v = g->get(k);
      char* end = nullptr;
      if (!v || (strtod(v->c_str(), &end), *end != '\0') || strtod(v->c_str(), nullptr) < 0) {
        r.error = std::string("graph attribute ") + k + " missing or not a number";
        return r;
      }
    }
    for (const char* k : {"typeintra", "typeinter"})
      if (!g->get(k) || !types.count(*g->get(k))) {
        r.error = std::string("graph attribute ") + k + " not a NCCL path type";
        return r;
      }
    if (atol(g->get("nchannels")->c_str()) != static_cast<long>(g->subs.size()) || g->subs.empty()) {
      r.error = "nchannels does not match the channel elements";
      return r;
    }
    std::multiset<long> first;
    for (size_t c = 0; c < g->subs.size(); c++) {
      const Node& ch = *g->subs[c];
      if (ch.name != "channel") {
        r.error = "<" + ch.name + "> under <graph>";
        return r;
      }
      std::multiset<long> devs;
      for (const auto& e : ch.subs) {
        if ((e->name != "gpu" && e->name != "net") || !e->subs.empty()) {
          r.error = "channel may only hold empty <gpu>/<net>";
          return r;
        }
        auto d = e->get("dev");
        char* end = nullptr;
        long v = d ? strtol(d->c_str(), &end, 16) : -1;  // NCCL reads dev as hex
        if (!d || d->empty() || *end != '\0' || v < 0) {
          r.error = "channel element without a hex dev";
          return r;
        }
        if (e->name == "gpu") devs.insert(v);
      }
      if (devs.empty() || std::set<long>(devs.begin(), devs.end()).size() != devs.size()) {
        r.error = "a channel must list each GPU exactly once";
        return r;
      }
      if (c == 0) first = devs;
      else if (devs != first) {
        r.error = "channels disagree on the set of GPUs";
        return r;
      }
    }
  }
  r.ok = true;
  return r;
}

}  // namespace icn::topo::test
