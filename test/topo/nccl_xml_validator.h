// Test-side validator of NCCL's XML input rules (topology: src/graph/xml.cc parser + topo.cc readers;
// graph: search.cc). Stricter than NCCL where NCCL would silently misread (e.g. an empty attribute from a
// space before "/>"), so anything that passes here is read by NCCL the way we meant it.
#pragma once
#include <string>

namespace icn::topo::test {

struct XmlCheck {
  bool ok = false;
  std::string error;
  size_t nodes = 0;
};

XmlCheck validateNcclTopology(const std::string& text);
XmlCheck validateNcclGraph(const std::string& text);

}  // namespace icn::topo::test
