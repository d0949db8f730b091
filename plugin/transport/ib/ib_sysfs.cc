#include "transport/ib/ib_sysfs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/sysfs.h"

namespace icn::ib {

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

static bool isNumber(const std::string& n) { return !n.empty() && std::all_of(n.begin(), n.end(), ::isdigit); }

static void scanPort(const SysRoot& sys, const std::string& portDir, int port, PortInfo* p) {
  p->port = port;
  if (auto s = sys.line(portDir + "/state")) p->active = s->find("ACTIVE") != std::string::npos;
  if (auto s = sys.line(portDir + "/link_layer")) p->ethernet = (*s == "Ethernet");
  if (auto s = sys.line(portDir + "/rate")) p->speedMbps = parseRateMbps(*s);
  if (auto s = sys.line(portDir + "/lid")) p->lid = uint16_t(strtoul(s->c_str(), nullptr, 0));
  std::vector<int> indices;
  for (const std::string& n : sys.list(portDir + "/gids"))
    if (isNumber(n)) indices.push_back(atoi(n.c_str()));
  std::sort(indices.begin(), indices.end());
  for (int i : indices) {
    GidEntry g;
    g.index = i;
    const std::string idx = std::to_string(i);
    auto text = sys.line(portDir + "/gids/" + idx);
    if (!text || !parseGid(*text, &g.gid)) continue;
    if (std::all_of(g.gid.begin(), g.gid.end(), [](uint8_t b) { return b == 0; })) continue;
    // An unset entry reads as an error (EINVAL): the type stays unknown, the netdev empty.
    if (auto t = sys.line(portDir + "/gid_attrs/types/" + idx)) g.type = parseGidType(*t);
    if (auto nd = sys.line(portDir + "/gid_attrs/ndevs/" + idx)) g.ndev = *nd;
    if (!p->ethernet && g.type == GidType::Unknown) g.type = GidType::IbRoceV1;
    p->gids.push_back(std::move(g));
  }
}

Status scanSysfs(const std::string& root, std::vector<HcaInfo>* out, std::string* why) {
  out->clear();
  const SysRoot sys(root);
  const std::string classDir = "/sys/class/infiniband";
  if (!sys.exists(classDir)) {
    if (why) *why = "no RDMA device (" + sys.path(classDir) + " missing: rdma kernel modules not loaded?)";
    return Status::SystemError;
  }
  for (const std::string& name : sys.list(classDir)) {  // sorted by name
    HcaInfo h;
    h.name = name;
    const std::string dev = classDir + "/" + name;
    if (auto s = sys.line(dev + "/node_guid")) parseGuid(*s, &h.guid);
    // The PCI function as the host sees it (a fixture root removed); software devices have none.
    if (auto pci = sys.resolve(dev + "/device")) h.pciPath = *pci;
    std::vector<int> ports;
    for (const std::string& p : sys.list(dev + "/ports")) ports.push_back(atoi(p.c_str()));
    std::sort(ports.begin(), ports.end());
    for (int port : ports) {
      PortInfo p;
      scanPort(sys, dev + "/ports/" + std::to_string(port), port, &p);
      h.ports.push_back(std::move(p));
    }
    out->push_back(std::move(h));
  }
  if (out->empty()) {
    if (why) *why = "no RDMA device";
    return Status::SystemError;
  }
  return Status::Ok;
}

}  // namespace icn::ib
