#include "topo/cpuset.h"

#include <bit>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace icn::topo {

void CpuSet::set(int cpu) {
  if (cpu < 0 || cpu >= (1 << 20)) return;  // ignore absurd ids rather than allocate gigabytes
  size_t word = static_cast<size_t>(cpu) / 64;
  if (w_.size() <= word) w_.resize(word + 1, 0);
  w_[word] |= uint64_t{1} << (cpu % 64);
}

bool CpuSet::test(int cpu) const {
  if (cpu < 0) return false;
  size_t word = static_cast<size_t>(cpu) / 64;
  return word < w_.size() && (w_[word] >> (cpu % 64)) & 1;
}

bool CpuSet::empty() const {
  for (uint64_t v : w_)
    if (v) return false;
  return true;
}

int CpuSet::count() const {
  int n = 0;
  for (uint64_t v : w_) n += std::popcount(v);
  return n;
}

int CpuSet::first() const {
  for (size_t i = 0; i < w_.size(); i++)
    if (w_[i]) return static_cast<int>(i * 64) + std::countr_zero(w_[i]);
  return -1;
}

int CpuSet::last() const {
  for (size_t i = w_.size(); i-- > 0;)
    if (w_[i]) return static_cast<int>(i * 64) + 63 - std::countl_zero(w_[i]);
  return -1;
}

std::vector<int> CpuSet::ids() const {
  std::vector<int> out;
  for (size_t i = 0; i < w_.size(); i++)
    for (int b = 0; b < 64; b++)
      if ((w_[i] >> b) & 1) out.push_back(static_cast<int>(i * 64) + b);
  return out;
}

void CpuSet::trim() {
  while (!w_.empty() && w_.back() == 0) w_.pop_back();
}

bool CpuSet::operator==(const CpuSet& o) const {
  CpuSet a = *this, b = o;
  a.trim();
  b.trim();
  return a.w_ == b.w_;
}

bool CpuSet::intersects(const CpuSet& o) const { return !(*this & o).empty(); }
bool CpuSet::subsetOf(const CpuSet& o) const { return (*this & o) == *this; }

CpuSet CpuSet::operator&(const CpuSet& o) const {
  CpuSet r;
  r.w_.resize(std::min(w_.size(), o.w_.size()));
  for (size_t i = 0; i < r.w_.size(); i++) r.w_[i] = w_[i] & o.w_[i];
  r.trim();
  return r;
}

CpuSet CpuSet::operator|(const CpuSet& o) const {
  CpuSet r;
  r.w_.resize(std::max(w_.size(), o.w_.size()), 0);
  for (size_t i = 0; i < r.w_.size(); i++)
    r.w_[i] = (i < w_.size() ? w_[i] : 0) | (i < o.w_.size() ? o.w_[i] : 0);
  return r;
}

std::optional<CpuSet> CpuSet::parseList(const std::string& s) {
  CpuSet r;
  size_t i = 0;
  auto skipWs = [&] {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) i++;
  };
  auto num = [&](int& out) {
    if (i >= s.size() || !isdigit(static_cast<unsigned char>(s[i]))) return false;
    long v = 0;
    while (i < s.size() && isdigit(static_cast<unsigned char>(s[i]))) {
      v = v * 10 + (s[i++] - '0');
      if (v >= (1 << 20)) return false;
    }
    out = static_cast<int>(v);
    return true;
  };
  skipWs();
  if (i == s.size()) return r;  // empty list is valid (e.g. a memoryless node)
  while (true) {
    int a, b;
    if (!num(a)) return std::nullopt;
    b = a;
    if (i < s.size() && s[i] == '-') {
      i++;
      if (!num(b) || b < a) return std::nullopt;
    }
    for (int c = a; c <= b; c++) r.set(c);
    skipWs();
    if (i == s.size()) return r;
    if (s[i] != ',') return std::nullopt;
    i++;
  }
}

std::optional<CpuSet> CpuSet::parseMask(const std::string& in) {
  std::string s;
  for (char c : in)
    if (!isspace(static_cast<unsigned char>(c))) s += c;
  if (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0) s = s.substr(2);
  if (s.empty()) return std::nullopt;
  std::vector<std::string> groups;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string g = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (g.rfind("0x", 0) == 0) g = g.substr(2);  // hwloc writes "0xffffffff,0xffffffff"
    if (g.empty() || g.size() > 8) return std::nullopt;
    for (char c : g)
      if (!isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    groups.push_back(g);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  CpuSet r;
  int bit = 0;
  for (size_t gi = groups.size(); gi-- > 0; bit += 32) {
    uint32_t v = static_cast<uint32_t>(strtoul(groups[gi].c_str(), nullptr, 16));
    for (int b = 0; b < 32; b++)
      if ((v >> b) & 1) r.set(bit + b);
  }
  return r;
}

std::string CpuSet::toList() const {
  std::string out;
  std::vector<int> v = ids();
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) j++;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

std::string CpuSet::toMask(int minGroups) const {
  int groups = std::max(minGroups, (last() + 32) / 32);
  if (groups < 1) groups = 1;
  std::string out;
  for (int g = groups - 1; g >= 0; g--) {
    uint32_t v = 0;
    for (int b = 0; b < 32; b++)
      if (test(g * 32 + b)) v |= 1u << b;
    char buf[16];
    snprintf(buf, sizeof buf, "%08x", v);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

}  // namespace icn::topo
