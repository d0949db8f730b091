#include "telemetry/heatmap.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <tuple>
#include <map>
#include <vector>

#include "core/json.h"
#include "core/log.h"
#include "core/net_counters.h"
#include "core/params.h"
#include "diagnose/service.h"
#include "core/private_file.h"
#include "telemetry/coll_names.h"
#include "telemetry/periodic_file.h"

namespace icn::telemetry::heatmap {
namespace {

PeriodicFile<>& file() {
  // Never destroyed: its thread may outlive statics.
  static auto* f = new PeriodicFile<>("heatmap", writeSnapshot);
  return *f;
}

std::string hostName() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

template <typename... A>
void appendf(std::string& out, const char* fmt, A... args) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, fmt, args...);
  if (n > 0) out.append(buf, std::min<size_t>(n, sizeof buf - 1));
}

}  // namespace

std::string snapshotPath() {
  const std::string& p = params::getString(params::Id::HeatmapFile);
  if (!p.empty()) return p;
  if (params::getString(params::Id::Tuner) == "off") return "";
  std::string dir, why;
  if (privfile::runtimeDir(&dir, &why) != Status::Ok) {
    ICN_WARN(subsys::Tuning, "heatmap: no snapshot file: %s", why.c_str());
    return "";
  }
  return dir + "/heatmap-" + std::to_string(getpid()) + ".json";
}

std::shared_ptr<CommEntry> registerComm(uint64_t commId, int rank, int nranks) {
  auto e = std::make_shared<CommEntry>();
  e->commId = commId;
  e->rank = rank;
  e->nranks = nranks;
  PeriodicWriter::Target target;
  bool started = file().add({e, {}}, [&] {
    // The default snapshot is a live view in the per-user runtime directory: it goes with the process. A file the
    // user named keeps the final picture.
    target = {snapshotPath(), !params::isSetByUser(params::Id::HeatmapFile)};
    return target;
  });
  if (started)
    ICN_INFO(subsys::Tuning, "heatmap: snapshots to %s every %lld ms", target.path.c_str(),
             static_cast<long long>(params::getInt(params::Id::HeatmapIntervalMs)));
  return e;
}

void unregisterComm(const std::shared_ptr<CommEntry>& entry) { file().finalize(entry); }

std::string renderJson() {
  std::vector<NetCommSample> net = netstats::snapshot();
  // Key every comm by (commId, rank); net connections whose local rank is unknown land under rank -1.
  std::map<std::pair<uint64_t, int>, std::pair<std::shared_ptr<CommEntry>, std::vector<const NetCommSample*>>> comms;
  for (auto& m : file().members()) comms[{m.entry->commId, m.entry->rank}].first = m.entry;
  for (const auto& n : net) comms[{n.info.commId, n.info.localRank}].second.push_back(&n);

  std::string out;
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch()).count();
  appendf(out, "{\"version\":1,\"pid\":%d,\"host\":", static_cast<int>(getpid()));
  out += json::quote(hostName());
  appendf(out, ",\"time_ms\":%lld,\"comms\":[", static_cast<long long>(now));
  bool firstComm = true;
  for (auto& [key, val] : comms) {
    auto& [entry, conns] = val;
    if (!firstComm) out += ',';
    firstComm = false;
    appendf(out, "\n{\"commId\":\"0x%llx\",\"rank\":%d,\"nranks\":%d,\"peers\":[",
            static_cast<unsigned long long>(key.first), key.second, entry ? entry->nranks : 0);
    // One row per (peer, channel): send and receive directions merged.
    struct Row { int peerRank; std::string peer; int channel; uint64_t sb = 0, sm = 0, rb = 0, rm = 0; };
    std::vector<Row> rows;
    for (const NetCommSample* n : conns) {
      auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
        return r.peer == n->info.peer && r.channel == n->info.channel && r.peerRank == n->info.peerRank;
      });
      if (it == rows.end()) {
        rows.push_back(Row{n->info.peerRank, n->info.peer, n->info.channel});
        it = rows.end() - 1;
      }
      (n->info.isSend ? it->sb : it->rb) += n->bytes;
      (n->info.isSend ? it->sm : it->rm) += n->messages;
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return std::tie(a.peerRank, a.peer, a.channel) < std::tie(b.peerRank, b.peer, b.channel);
    });
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      appendf(out, "%s{\"peerRank\":%d,\"peer\":", i ? "," : "", r.peerRank);
      out += json::quote(r.peer);
      appendf(out, ",\"channel\":%d,\"send_bytes\":%llu,\"send_msgs\":%llu,\"recv_bytes\":%llu,\"recv_msgs\":%llu}",
              r.channel, static_cast<unsigned long long>(r.sb), static_cast<unsigned long long>(r.sm),
              static_cast<unsigned long long>(r.rb), static_cast<unsigned long long>(r.rm));
    }
    out += "],\"collectives\":[";
    if (entry) {
      auto sums = entry->colls.summaries();
      for (size_t i = 0; i < sums.size(); ++i) {
        const CollSummary& c = sums[i];
        appendf(out,
                "%s{\"coll\":\"%s\",\"bucket_log2\":%d,\"algo\":\"%s\",\"proto\":\"%s\",\"channels\":%d,"
                "\"count\":%llu,\"mean_us\":%.3f,\"min_us\":%.3f,\"p50_us\":%.3f}",
                i ? "," : "", coll::collName(c.key.coll), c.key.bucket, coll::algoName(c.key.algo),
                coll::protoName(c.key.proto), c.key.channels, static_cast<unsigned long long>(c.count), c.meanUs,
                c.minUs, c.p50Us);
      }
    }
    out += "]}";
  }
  out += "\n],\"diagnose\":";
  out += diagnose::diagnoser().heatmapJson();  // per-peer lateness and the straggler findings raised
  out += "}\n";
  return out;
}

bool writeSnapshot(const std::string& path, std::string* why) {
  if (path.empty()) {
    if (why) *why = "no path";
    return false;
  }
  std::string json = renderJson();
  if (privfile::writeAtomic(path, json, /*sync=*/false, why) != Status::Ok) {
    if (why) *why = "write/rename " + *why;
    return false;
  }
  return true;
}

void resetForTesting() { file().resetForTesting(); }

}  // namespace icn::telemetry::heatmap
