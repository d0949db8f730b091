#include "topo/model.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace icn::topo {

const Numa* Machine::numa(int id) const {
  for (const Numa& n : numas)
    if (n.id == id) return &n;
  return nullptr;
}

int Machine::pciIndex(const std::string& busid) const {
  for (size_t i = 0; i < pci.size(); i++)
    if (pci[i].busid == busid) return static_cast<int>(i);
  return -1;
}

std::optional<std::string> Machine::getEnv(const std::string& k) const {
  auto it = env.find(k);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

const char* toString(PathType p) {
  switch (p) {
    case PathType::X: return "X";
    case PathType::NV: return "NV";
    case PathType::PIX: return "PIX";
    case PathType::PXB: return "PXB";
    case PathType::PHB: return "PHB";
    case PathType::NODE: return "NODE";
    case PathType::SYS: return "SYS";
  }
  return "?";
}

int pciNuma(const Machine& m, int idx) {
  for (int i = idx; i >= 0; i = m.pci[i].parent)
    if (m.pci[i].numa >= 0) return m.pci[i].numa;
  return -1;
}

namespace {
std::vector<int> chain(const Machine& m, int idx) {  // idx, parent, ..., root
  std::vector<int> c;
  for (int i = idx; i >= 0 && c.size() < 64; i = m.pci[i].parent) c.push_back(i);
  return c;
}
}  // namespace

PathType pciPath(const Machine& m, int a, int b) {
  if (a == b) return PathType::X;
  std::vector<int> ca = chain(m, a), cb = chain(m, b);
  int lca = -1;
  size_t ia = 0, ib = 0;
  for (ia = 0; ia < ca.size() && lca < 0; ia++) {
    auto it = std::find(cb.begin(), cb.end(), ca[ia]);
    if (it != cb.end()) {
      lca = ca[ia];
      ib = static_cast<size_t>(it - cb.begin());
      break;
    }
  }
  if (lca < 0) {
    int na = pciNuma(m, a), nb = pciNuma(m, b);
    return (na >= 0 && na == nb) ? PathType::NODE : PathType::SYS;
  }
  if (m.pci[lca].hostBridge) return PathType::PHB;
  // Bridges crossed: everything strictly above a and b up to and including the common one. One switch
  // (downstream port, upstream port, downstream port) is three bridges: that is still "a single switch".
  int bridges = 1;
  for (size_t k = 1; k < ia; k++) bridges += m.pci[ca[k]].bridge ? 1 : 0;
  for (size_t k = 1; k < ib; k++) bridges += m.pci[cb[k]].bridge ? 1 : 0;
  return bridges <= 3 ? PathType::PIX : PathType::PXB;
}

PathType gpuPath(const Machine& m, int ga, int gb, int* nvCount) {
  if (nvCount) *nvCount = 0;
  if (ga == gb) return PathType::X;
  const Gpu& a = m.gpus[ga];
  const Gpu& b = m.gpus[gb];
  const std::string& busB = m.pci[b.pci].busid;
  int direct = 0, nvsA = 0, nvsB = 0;
  for (const NvLink& l : a.nvlinks) {
    if (l.tclass == 0x03 && l.target == busB) direct += l.count;
    if (l.tclass == 0x068000) nvsA += l.count;
  }
  for (const NvLink& l : b.nvlinks)
    if (l.tclass == 0x068000) nvsB += l.count;
  int nv = direct + std::min(nvsA, nvsB);
  if (nv > 0) {
    if (nvCount) *nvCount = nv;
    return PathType::NV;
  }
  return pciPath(m, a.pci, b.pci);
}

std::optional<uint64_t> parseBusId(const std::string& s) {
  // domain:bus:dev.fn with a 4..8 digit domain (NVML uses 8).
  size_t c1 = s.find(':');
  if (c1 == std::string::npos || c1 < 1 || c1 > 8) return std::nullopt;
  size_t c2 = s.find(':', c1 + 1);
  size_t dot = s.find('.', c1 + 1);
  if (c2 != c1 + 3 || dot != c2 + 3 || s.size() != dot + 2) return std::nullopt;
  for (size_t i = 0; i < s.size(); i++) {
    if (i == c1 || i == c2 || i == dot) continue;
    if (!isxdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
  }
  uint64_t dom = strtoull(s.substr(0, c1).c_str(), nullptr, 16);
  uint64_t bus = strtoull(s.substr(c1 + 1, 2).c_str(), nullptr, 16);
  uint64_t dev = strtoull(s.substr(c2 + 1, 2).c_str(), nullptr, 16);
  uint64_t fn = strtoull(s.substr(dot + 1, 1).c_str(), nullptr, 16);
  if (dom > 0xffff || dev > 0x1f || fn > 7) return std::nullopt;
  return (dom << 16) | (bus << 8) | (dev << 3) | fn;
}

std::string formatBusId(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>((v >> 16) & 0xffff),
           static_cast<unsigned>((v >> 8) & 0xff), static_cast<unsigned>((v >> 3) & 0x1f),
           static_cast<unsigned>(v & 7));
  return buf;
}

std::string normalizeBusId(const std::string& s) {
  auto v = parseBusId(s);
  return v ? formatBusId(*v) : std::string();
}

}  // namespace icn::topo
