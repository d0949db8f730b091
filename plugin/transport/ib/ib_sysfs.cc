#include "transport/ib/ib_sysfs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace icn::ib {
namespace fs = std::filesystem;

bool readSysfsFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;  // sysfs returns EINVAL for unset gid_attrs
  *out = ss.str();
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return true;
}

static int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses colon-separated 16-bit hex groups (the sysfs format: all groups written out, no "::").
static bool parseHexGroups(const std::string& text, uint8_t* out, size_t nGroups) {
  size_t pos = 0;
  for (size_t g = 0; g < nGroups; ++g) {
    int v = 0, digits = 0;
    while (pos < text.size() && text[pos] != ':') {
      int d = hexDigit(text[pos++]);
      if (d < 0 || ++digits > 4) return false;
      v = v * 16 + d;
    }
    if (digits == 0) return false;
    out[2 * g] = uint8_t(v >> 8);
    out[2 * g + 1] = uint8_t(v);
    if (g + 1 < nGroups) {
      if (pos >= text.size()) return false;
      ++pos;  // ':'
    }
  }
  return pos == text.size();
}

bool parseGid(const std::string& text, std::array<uint8_t, 16>* gid) {
  return parseHexGroups(text, gid->data(), 8);
}

bool parseGuid(const std::string& text, uint64_t* guid) {
  uint8_t b[8];
  if (!parseHexGroups(text, b, 4)) return false;
  uint64_t v = 0;
  for (uint8_t x : b) v = (v << 8) | x;
  *guid = v;
  return true;
}

std::string gidToString(const std::array<uint8_t, 16>& gid) {
  char buf[48];
  int n = 0;
  for (int i = 0; i < 16; i += 2) {
    n += snprintf(buf + n, sizeof(buf) - n, "%s%02x%02x", i ? ":" : "", gid[i], gid[i + 1]);
  }
  return buf;
}

int parseRateMbps(const std::string& rate) {
  // "100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)", "10 Gb/sec (1X QDR)"
  char* end = nullptr;
  double gbps = strtod(rate.c_str(), &end);
  if (end == rate.c_str() || gbps <= 0) return 0;
  return int(gbps * 1000 + 0.5);
}

static GidType parseGidType(const std::string& t) {
  if (t == "RoCE v2") return GidType::RoceV2;
  if (t == "IB/RoCE v1") return GidType::IbRoceV1;
  return GidType::Unknown;
}

static void scanPort(const fs::path& portDir, int port, PortInfo* p) {
  std::string s;
  p->port = port;
  if (readSysfsFile(portDir / "state", &s)) p->active = s.find("ACTIVE") != std::string::npos;
  if (readSysfsFile(portDir / "link_layer", &s)) p->ethernet = (s == "Ethernet");
  if (readSysfsFile(portDir / "rate", &s)) p->speedMbps = parseRateMbps(s);
  if (readSysfsFile(portDir / "lid", &s)) p->lid = uint16_t(strtoul(s.c_str(), nullptr, 0));
  std::error_code ec;
  std::vector<int> indices;
  for (const auto& e : fs::directory_iterator(portDir / "gids", ec)) {
    const std::string n = e.path().filename().string();
    if (!n.empty() && std::all_of(n.begin(), n.end(), ::isdigit)) indices.push_back(atoi(n.c_str()));
  }
  std::sort(indices.begin(), indices.end());
  for (int i : indices) {
    GidEntry g;
    g.index = i;
    if (!readSysfsFile(portDir / "gids" / std::to_string(i), &s) || !parseGid(s, &g.gid)) continue;
    if (std::all_of(g.gid.begin(), g.gid.end(), [](uint8_t b) { return b == 0; })) continue;
    if (readSysfsFile(portDir / "gid_attrs" / "types" / std::to_string(i), &s)) g.type = parseGidType(s);
    if (readSysfsFile(portDir / "gid_attrs" / "ndevs" / std::to_string(i), &s)) g.ndev = s;
    if (!p->ethernet && g.type == GidType::Unknown) g.type = GidType::IbRoceV1;
    p->gids.push_back(std::move(g));
  }
}

Status scanSysfs(const std::string& root, std::vector<HcaInfo>* out, std::string* why) {
  out->clear();
  const fs::path classDir = fs::path(root.empty() ? "/" : root) / "sys/class/infiniband";
  std::error_code ec;
  if (!fs::is_directory(classDir, ec)) {
    if (why) *why = "no RDMA device (" + classDir.string() + " missing: rdma kernel modules not loaded?)";
    return Status::SystemError;
  }
  for (const auto& e : fs::directory_iterator(classDir, ec)) {
    HcaInfo h;
    h.name = e.path().filename().string();
    const fs::path dev = e.path();
    std::string s;
    if (readSysfsFile(dev / "node_guid", &s)) parseGuid(s, &h.guid);
    fs::path pci = fs::canonical(dev / "device", ec);
    if (!ec) {
      std::string p = pci.string();
      // Report the path as the host sees it: strip the fixture root.
      if (!root.empty()) {
        std::string r = fs::canonical(root, ec).string();
        if (!ec && p.compare(0, r.size(), r) == 0) p = p.substr(r.size());
      }
      h.pciPath = p;
    }
    ec.clear();
    std::vector<int> ports;
    for (const auto& pe : fs::directory_iterator(dev / "ports", ec)) {
      ports.push_back(atoi(pe.path().filename().c_str()));
    }
    ec.clear();
    std::sort(ports.begin(), ports.end());
    for (int port : ports) {
      PortInfo p;
      scanPort(dev / "ports" / std::to_string(port), port, &p);
      h.ports.push_back(std::move(p));
    }
    out->push_back(std::move(h));
  }
  std::sort(out->begin(), out->end(), [](const HcaInfo& a, const HcaInfo& b) { return a.name < b.name; });
  if (out->empty()) {
    if (why) *why = "no RDMA device";
    return Status::SystemError;
  }
  return Status::Ok;
}

}  // namespace icn::ib
