// Shared helpers: fixture paths, a scratch copy of a recorded sysfs tree, probing a fixture machine.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "topo/probe.h"

namespace icn::topo::test {

// sys-* trees are generated at build time by gen_fixtures.py (test/topo/CMakeLists.txt); the rest is committed.
inline std::string fixture(const std::string& name) {
  const bool generated = name.rfind("sys-", 0) == 0;
  return std::string(generated ? ICN_TOPO_SYS_FIXTURES : ICN_TOPO_FIXTURES) + "/" + name;
}

// A private copy of a fixture folder that a test may edit; removed on destruction.
class TempTree {
 public:
  explicit TempTree(const std::string& fromFixture = "") {
    char tmpl[] = "/tmp/icn-topo-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    dir_ = d ? d : "/tmp";
    if (!fromFixture.empty())
      std::filesystem::copy(fixture(fromFixture), dir_, std::filesystem::copy_options::recursive);
  }
  ~TempTree() {
    std::error_code ec;
    if (dir_ != "/tmp") std::filesystem::remove_all(dir_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;
  const std::string& dir() const { return dir_; }
  void write(const std::string& abs, const std::string& text) const {
    std::filesystem::path p = dir_ + abs;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  }
  void remove(const std::string& abs) const { std::filesystem::remove_all(dir_ + abs); }

 private:
  std::string dir_;
};

inline Machine probeFixture(const std::string& xml, const std::string* sysRoot, const std::string& facts = "",
                            std::map<std::string, std::string> env = {}) {
  ProbeOptions o;
  o.hwlocXml = fixture(xml);
  if (sysRoot) o.sysRoot = *sysRoot;
  if (!facts.empty()) o.factsFile = fixture(facts);
  o.env = env;
  Machine m;
  std::string err;
  Status st = probe(o, m, err);
  if (!ok(st)) ADD_FAILURE() << "probe failed: " << err;
  return m;
}

}  // namespace icn::topo::test
