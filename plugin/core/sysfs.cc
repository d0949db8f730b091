#include "core/sysfs.h"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

namespace icn {

SysRoot::SysRoot(std::string root) : root_(std::move(root)) {
  if (root_.empty()) root_ = "/";
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string SysRoot::path(const std::string& abs) const { return root_ == "/" ? abs : root_ + abs; }

std::optional<std::string> SysRoot::text(const std::string& abs, size_t maxBytes) const {
  std::ifstream f(path(abs), std::ios::binary);
  if (!f) return std::nullopt;
  std::string out(maxBytes, '\0');
  f.read(out.data(), static_cast<std::streamsize>(maxBytes));
  out.resize(static_cast<size_t>(f.gcount()));
  return out;
}

std::optional<std::string> SysRoot::line(const std::string& abs) const {
  auto t = text(abs, 4096);
  if (!t) return std::nullopt;
  std::string s = t->substr(0, t->find('\n'));
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return std::nullopt;
  return s;
}

std::optional<long long> SysRoot::integer(const std::string& abs) const {
  auto l = line(abs);
  if (!l) return std::nullopt;
  char* end = nullptr;
  long long v = strtoll(l->c_str(), &end, 0);
  if (end == l->c_str()) return std::nullopt;
  return v;
}

std::optional<std::vector<unsigned char>> SysRoot::bytes(const std::string& abs, size_t maxBytes) const {
  std::ifstream f(path(abs), std::ios::binary);
  if (!f) return std::nullopt;
  std::vector<unsigned char> out(maxBytes);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(maxBytes));
  out.resize(static_cast<size_t>(f.gcount()));
  return out;
}

bool SysRoot::exists(const std::string& abs) const {
  struct stat st;
  return stat(path(abs).c_str(), &st) == 0;
}

std::vector<std::string> SysRoot::list(const std::string& absDir) const {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(path(absDir).c_str()), closedir);
  if (!d) return out;
  while (dirent* e = readdir(d.get())) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> SysRoot::resolve(const std::string& abs) const {
  char buf[PATH_MAX];
  if (!realpath(path(abs).c_str(), buf)) return std::nullopt;
  std::string p = buf;
  if (root_ == "/") return p;
  char rootBuf[PATH_MAX];
  if (!realpath(root_.c_str(), rootBuf)) return std::nullopt;
  const std::string r = rootBuf;
  if (p.compare(0, r.size(), r) != 0 || (p.size() > r.size() && p[r.size()] != '/')) return std::nullopt;
  p.erase(0, r.size());
  if (p.empty()) p = "/";
  return p;
}

}  // namespace icn
