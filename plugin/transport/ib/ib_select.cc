#include "transport/ib/ib_select.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace icn::ib {

HcaFilter HcaFilter::parse(const std::string& spec) {
  HcaFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') { f.exclude_ = true; ++pos; }
  if (pos < spec.size() && spec[pos] == '=') { f.exact_ = true; ++pos; }
  std::stringstream ss(spec.substr(pos));
  std::string item;
  while (std::getline(ss, item, ',')) {
    // trim spaces
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    Entry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      char* end = nullptr;
      long p = strtol(item.c_str() + colon + 1, &end, 10);
      e.port = (end && *end == 0 && p > 0) ? int(p) : -1;
    }
    if (!e.name.empty()) f.entries_.push_back(std::move(e));
  }
  return f;
}

bool HcaFilter::matches(const std::string& dev, int port) const {
  if (entries_.empty()) return true;
  bool hit = false;
  for (const auto& e : entries_) {
    bool nameOk = exact_ ? dev == e.name : dev.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || e.port == port)) { hit = true; break; }
  }
  return exclude_ ? !hit : hit;
}

std::string HcaFilter::describe() const {
  if (entries_.empty()) return "all devices";
  std::string s = exclude_ ? "excluding " : "only ";
  s += exact_ ? "exactly " : "prefixes ";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i) s += ",";
    s += entries_[i].name;
    if (entries_[i].port > 0) s += ":" + std::to_string(entries_[i].port);
  }
  return s;
}

bool gidIsIpv4Mapped(const std::array<uint8_t, 16>& g) {
  for (int i = 0; i < 10; ++i) if (g[i]) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

bool gidIsLinkLocal(const std::array<uint8_t, 16>& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

int selectGid(const PortInfo& port, int userIndex, std::string* why) {
  auto say = [&](const std::string& s) { if (why) *why = s; };
  if (userIndex >= 0) {
    for (const auto& g : port.gids) {
      if (g.index == userIndex) { say("GID index " + std::to_string(userIndex) + " (ICN_IB_GID_INDEX)"); return userIndex; }
    }
    say("ICN_IB_GID_INDEX=" + std::to_string(userIndex) + " is not a populated GID on this port");
    return -1;
  }
  if (!port.ethernet) {
    // IB routes by LID; GID 0 (subnet prefix + port GUID) is what the SM programs.
    if (port.gids.empty()) { say("InfiniBand port has no GID"); return -1; }
    say("InfiniBand port: GID index " + std::to_string(port.gids.front().index));
    return port.gids.front().index;
  }
  // Lower score is better.
  int best = -1, bestScore = 1 << 30;
  for (const auto& g : port.gids) {
    int score = 0;
    if (g.type != GidType::RoceV2) score += 4;
    if (!gidIsIpv4Mapped(g.gid)) score += 2;
    if (gidIsLinkLocal(g.gid)) score += 16;
    if (score < bestScore) { bestScore = score; best = g.index; }
  }
  if (best < 0) { say("RoCE port has no GID (no IP address on its netdev?)"); return -1; }
  for (const auto& g : port.gids) {
    if (g.index != best) continue;
    std::string s = "GID index " + std::to_string(best) + " " + gidToString(g.gid) +
                    (g.type == GidType::RoceV2 ? " RoCE v2" : " RoCE v1");
    if (gidIsLinkLocal(g.gid)) s += " (link-local: no global GID on this port)";
    say(s);
  }
  return best;
}

std::vector<PortChoice> choosePorts(const std::vector<HcaInfo>& hcas, const HcaFilter& filter, std::string* why) {
  std::vector<PortChoice> out;
  int seen = 0, filtered = 0;
  for (size_t h = 0; h < hcas.size(); ++h) {
    for (const auto& p : hcas[h].ports) {
      ++seen;
      if (!filter.matches(hcas[h].name, p.port)) { ++filtered; continue; }
      if (!p.active) continue;
      out.push_back({int(h), p.port});
    }
  }
  if (out.empty() && why) {
    if (seen == 0) *why = "no RDMA device";
    else if (filtered == seen) *why = "no RDMA port passes the HCA filter (" + filter.describe() + ")";
    else *why = "no active port";
  }
  return out;
}

Status fuseDevices(const std::vector<DeviceProps>& phys, std::span<const int> members, DeviceProps* out,
                   std::string* why) {
  if (members.empty() || members.size() > size_t(kMaxVDevMembers)) {
    *why = std::to_string(members.size()) + " devices (1.." + std::to_string(kMaxVDevMembers) + " allowed)";
    return Status::InvalidArgument;
  }
  DeviceProps v;
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    if (m < 0 || m >= int(phys.size())) {
      *why = std::to_string(m) + " is not a physical device (0.." + std::to_string(int(phys.size()) - 1) + ")";
      return Status::InvalidArgument;
    }
    for (size_t j = 0; j < i; ++j) {
      if (members[j] == m) {
        *why = "device " + std::to_string(m) + " listed twice";
        return Status::InvalidArgument;
      }
    }
    const DeviceProps& p = phys[m];
    if (i == 0) {
      v = p;
      v.speedMbps = 0;
      v.members.clear();
    } else {
      v.name += "+" + p.name;
      v.ptrSupport &= p.ptrSupport;
      v.maxComms = std::min(v.maxComms, p.maxComms);
      v.latencyUs = std::max(v.latencyUs, p.latencyUs);
    }
    v.speedMbps += p.speedMbps;
    v.members.push_back(m);
  }
  *out = std::move(v);
  return Status::Ok;
}

}  // namespace icn::ib
