// A set of CPU (or NUMA node) ids with the text forms Linux and NCCL use.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace icn::topo {

class CpuSet {
 public:
  void set(int cpu);
  bool test(int cpu) const;
  bool empty() const;
  int count() const;
  int first() const;  // -1 when empty
  int last() const;   // -1 when empty
  std::vector<int> ids() const;
  bool operator==(const CpuSet& o) const;
  bool intersects(const CpuSet& o) const;
  bool subsetOf(const CpuSet& o) const;
  CpuSet operator&(const CpuSet& o) const;
  CpuSet operator|(const CpuSet& o) const;

  // "0-3,8,10-11" (sysfs cpulist, Cpus_allowed_list). Returns nullopt on malformed input.
  static std::optional<CpuSet> parseList(const std::string& s);
  // "ffffffff,0000ffff" (sysfs cpumap: 32-bit hex groups, most significant first; an optional 0x is accepted).
  static std::optional<CpuSet> parseMask(const std::string& s);
  std::string toList() const;
  // sysfs cpumap form with at least minGroups groups of 8 hex digits (what NCCL's affinity attribute parses).
  std::string toMask(int minGroups = 1) const;

 private:
  std::vector<uint64_t> w_;
  void trim();
};

}  // namespace icn::topo
