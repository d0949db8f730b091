#include "telemetry/prometheus.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <vector>

#include "core/log.h"
#include "core/net_counters.h"
#include "core/params.h"
#include "diagnose/service.h"
#include "core/private_file.h"
#include "telemetry/coll_names.h"
#include "telemetry/periodic_file.h"

namespace icn::telemetry::prometheus {
namespace {

// Value of Inspector's "version" label is its own format version; ours names this format instead.
constexpr const char* kFormatVersion = "icn1";

using Comm = PeriodicFile<CommLabels>::Member;

PeriodicFile<CommLabels>& file() {
  // Never destroyed: its thread may outlive statics.
  static auto* f = new PeriodicFile<CommLabels>("prometheus", writeFile);
  return *f;
}

std::string hostName() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0 || !h[0]) return "unknown";
  return h;
}

// The device of the CUDA context current on this thread (NCCL initialises the profiler on the thread that created
// the communicator). Only asks a CUDA driver the process has already loaded: never pulls libcuda in.
int currentCudaDevice() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) return -1;
  using GetDevice = int (*)(int*);
  auto fn = reinterpret_cast<GetDevice>(dlsym(lib, "cuCtxGetDevice"));
  int dev = -1;
  if (!fn || fn(&dev) != 0) dev = -1;
  dlclose(lib);  // drops only our reference
  return dev;
}

void appendLabelValue(std::string& out, const std::string& v) {
  out += '"';
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
}

void appendLabel(std::string& out, const char* name, const std::string& v) {
  if (out.size() > 1) out += ',';
  out += name;
  out += '=';
  appendLabelValue(out, v);
}

// "<lo>-<hi><unit>" in the unit of lo (1024-based, as Inspector writes it): "2-4MB", "512-1024KB".
std::string sizeRange(double lo, double hi) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  double scale = 1;
  while (u < 4 && lo >= scale * 1024) {
    scale *= 1024;
    ++u;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.0f-%.0f%s", std::floor(lo / scale), std::ceil(hi / scale), units[u]);
  return buf;
}

// Inspector's message_size is the message of one rank: the whole buffer for AllReduce, Broadcast and Reduce, one
// rank's share for AllGather and ReduceScatter. Our buckets count NCCL's total bytes (log2), so the range of a
// bucket is divided by nranks for those two.
std::string messageSize(int coll, int bucket, int nranks) {
  double lo = bucket == 0 ? 0 : std::ldexp(1.0, bucket), hi = std::ldexp(1.0, bucket + 1);
  if ((coll == coll::kAllGather || coll == coll::kReduceScatter) && nranks > 1) {
    lo /= nranks;
    hi /= nranks;
  }
  return sizeRange(lo, hi);
}

// Bus bandwidth factor over the algorithm bandwidth of NCCL's total bytes (nccl-tests' and Inspector's).
double busFactor(int coll, int nranks) {
  if (nranks <= 0) return 0;
  double n = nranks;
  if (coll == coll::kAllReduce) return 2 * (n - 1) / n;
  if (coll == coll::kAllGather || coll == coll::kReduceScatter) return (n - 1) / n;
  return 1;
}

const char* inspectorAlgo(int a) {
  static const char* names[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  return a >= 0 && a < coll::kNumAlgos ? names[a] : "unknown";
}
const char* inspectorProto(int p) {
  static const char* names[] = {"LL", "LL128", "Simple"};
  return p >= 0 && p < coll::kNumProtos ? names[p] : "unknown";
}

struct Agg {
  uint64_t count = 0;
  double sumUs = 0;
  double minUs = 0;
  double sumLogBw = 0;  // log(bytes/us) x calls, for the geometric mean
  uint64_t bwCount = 0;
  double factor = 0;
};

void appendSample(std::string& out, const char* name, const std::string& labels, double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "} %.6g\n", v);
  out += name;
  out += labels;
  out += buf;
}

// Counters print every digit: a byte count rounded to six would hide what moved between two scrapes.
void appendSample(std::string& out, const char* name, const std::string& labels, uint64_t v) {
  out += name;
  out += labels;
  out += "} " + std::to_string(v) + "\n";
}

// The counter families of one kind of rail (netstats::railSnapshot): one per RailSample field.
struct RailFamily {
  const char* name;
  const char* help;
  uint64_t RailSample::*field;
};
constexpr RailFamily kIbLinkFamilies[] = {
    {"icn_ib_link_bytes_total",
     "Bytes ICN's verbs transport wrote through each device port (sends; resent chunks included).", &RailSample::bytes},
    {"icn_ib_link_lost_total", "Connections' links through the port lost (failover to the others).",
     &RailSample::givenUp},
    {"icn_ib_link_readmitted_total", "Lost links through the port re-admitted.", &RailSample::back},
};
constexpr RailFamily kTcpRailFamilies[] = {
    {"icn_tcp_rail_bytes_total",
     "Bytes ICN's TCP transport put on each interface's helper sockets (sends; resent pieces included).",
     &RailSample::bytes},
    {"icn_tcp_rail_lanes_given_up_total", "Helper sockets on the interface given up (failover).", &RailSample::givenUp},
    {"icn_tcp_rail_lanes_back_total", "Given-up helper sockets on the interface that carry pieces again.",
     &RailSample::back},
};

// The families of the rails of `kind`, each sample labelled by node and the rail's name; nothing without such rails.
template <size_t N>
void appendRailFamilies(std::string& out, const std::string& node, const std::vector<RailSample>& rails,
                        RailKind kind, const char* nameLabel, const RailFamily (&families)[N]) {
  std::vector<std::pair<std::string, const RailSample*>> ofKind;
  for (const RailSample& r : rails) {
    if (r.kind != kind) continue;
    std::string l = "{";
    appendLabel(l, "node", node);
    appendLabel(l, nameLabel, r.ifname);
    ofKind.emplace_back(std::move(l), &r);
  }
  if (ofKind.empty()) return;
  for (const RailFamily& f : families) {
    out += std::string("# HELP ") + f.name + " " + f.help + "\n# TYPE " + f.name + " counter\n";
    for (const auto& [labels, r] : ofKind) appendSample(out, f.name, labels, r->*f.field);
  }
}

}  // namespace

std::string filePath() {
  const std::string& dir = params::getString(params::Id::PromDir);
  if (dir.empty()) return "";
  std::string host = hostName();
  std::replace(host.begin(), host.end(), '/', '_');
  return dir + (dir.back() == '/' ? "" : "/") + "icn-" + host + "-" + std::to_string(getpid()) + ".prom";
}

void addComm(const std::shared_ptr<CommEntry>& entry, const CommLabels& labels) {
  std::string path = filePath();
  if (path.empty()) return;
  CommLabels l = labels;
  if (l.commName.empty()) l.commName = "unknown";
  if (l.gpu < 0) l.gpu = currentCudaDevice();
  if (file().add({entry, l}, [&] { return PeriodicWriter::Target{path}; }))
    ICN_INFO(subsys::Tuning | subsys::Profile, "prometheus: metrics to %s every %lld ms", path.c_str(),
             static_cast<long long>(params::getInt(params::Id::HeatmapIntervalMs)));
}

void removeComm(const std::shared_ptr<CommEntry>& entry) { file().finalize(entry); }

std::string render() {
  const std::vector<Comm> comms = file().members();
  const std::string node = hostName();
  const char* job = getenv("SLURM_JOB_ID");
  const std::string jobId = job && job[0] ? job : "unknown";

  // One series per Inspector label set: communicators that share one (same name and shape) are merged, as
  // Inspector merges them, so no series appears twice.
  std::map<std::string, Agg> colls;
  for (const Comm& c : comms) {
    const int nranks = c.entry->nranks;
    const std::string gpu = c.labels.gpu >= 0 ? "GPU" + std::to_string(c.labels.gpu) : "unknown";
    for (const CollSummary& sum : c.entry->colls.summaries()) {
      const CollKey& k = sum.key;
      std::string labels = "{";
      appendLabel(labels, "version", kFormatVersion);
      appendLabel(labels, "slurm_job_id", jobId);
      appendLabel(labels, "node", node);
      appendLabel(labels, "gpu", gpu);
      appendLabel(labels, "comm_name", c.labels.commName);
      appendLabel(labels, "n_nodes", std::to_string(c.labels.nNodes));
      appendLabel(labels, "nranks", std::to_string(nranks));
      appendLabel(labels, "collective", coll::collName(k.coll));
      appendLabel(labels, "message_size", messageSize(k.coll, k.bucket, nranks));
      appendLabel(labels, "algo_proto", std::string(inspectorAlgo(k.algo)) + "_" + inspectorProto(k.proto));
      Agg& a = colls[labels];
      a.minUs = a.count ? std::min(a.minUs, sum.minUs) : sum.minUs;
      a.count += sum.count;
      a.sumUs += sum.sumUs;
      if (sum.bwCount && sum.gmBytesPerUs > 0) {
        a.sumLogBw += std::log(sum.gmBytesPerUs) * static_cast<double>(sum.bwCount);
        a.bwCount += sum.bwCount;
      }
      a.factor = busFactor(k.coll, nranks);
    }
  }

  std::string out;
  // Inspector writes its two metrics untyped and without help; the same here keeps node_exporter from seeing two
  // different descriptions of one metric when both exporters share a textfile directory.
  for (const auto& [labels, a] : colls) {
    double gbs = a.bwCount ? std::exp(a.sumLogBw / static_cast<double>(a.bwCount)) * 1e-3 * a.factor : 0.0;
    appendSample(out, "nccl_bus_bandwidth_gbs", labels, gbs);
  }
  for (const auto& [labels, a] : colls)
    appendSample(out, "nccl_collective_exec_time_microseconds", labels, a.count ? a.sumUs / a.count : 0.0);
  out += "# HELP icn_collective_calls_total Collectives timed on the GPU by ICN's profiler.\n";
  out += "# TYPE icn_collective_calls_total counter\n";
  for (const auto& [labels, a] : colls) appendSample(out, "icn_collective_calls_total", labels, a.count);
  out += "# HELP icn_collective_min_time_microseconds Shortest GPU time of one collective.\n";
  out += "# TYPE icn_collective_min_time_microseconds gauge\n";
  for (const auto& [labels, a] : colls) appendSample(out, "icn_collective_min_time_microseconds", labels, a.minUs);

  // Net traffic per communicator rank, peer and connection, summed over open and closed connections.
  std::map<std::tuple<uint64_t, int, int, int, bool>, std::pair<uint64_t, uint64_t>> net;
  for (const NetCommSample& n : netstats::snapshot()) {
    auto& v = net[{n.info.commId, n.info.localRank, n.info.peerRank, n.info.channel, n.info.isSend}];
    v.first += n.bytes;
    v.second += n.messages;
  }
  auto netLabels = [&](const auto& key) {
    const auto& [commId, rank, peerRank, channel, isSend] = key;
    char id[32];
    snprintf(id, sizeof id, "0x%llx", static_cast<unsigned long long>(commId));
    std::string l = "{";
    appendLabel(l, "node", node);
    appendLabel(l, "comm_id", id);
    appendLabel(l, "rank", std::to_string(rank));
    appendLabel(l, "peer_rank", std::to_string(peerRank));
    appendLabel(l, "channel", std::to_string(channel));
    appendLabel(l, "direction", isSend ? "send" : "recv");
    return l;
  };
  out += "# HELP icn_net_bytes_total Bytes through ICN's net plugin per communicator rank, peer and connection.\n";
  out += "# TYPE icn_net_bytes_total counter\n";
  for (const auto& [key, v] : net) appendSample(out, "icn_net_bytes_total", netLabels(key), v.first);
  out += "# HELP icn_net_messages_total Messages through ICN's net plugin per communicator rank, peer and "
         "connection.\n";
  out += "# TYPE icn_net_messages_total counter\n";
  for (const auto& [key, v] : net) appendSample(out, "icn_net_messages_total", netLabels(key), v.second);
  const std::vector<RailSample> railSamples = netstats::railSnapshot();
  appendRailFamilies(out, node, railSamples, RailKind::Ib, "link", kIbLinkFamilies);
  appendRailFamilies(out, node, railSamples, RailKind::Tcp, "interface", kTcpRailFamilies);
  out += diagnose::diagnoser().prometheusLines(node);  // per-peer lateness and the straggler findings raised

  out += "# HELP icn_metrics_timestamp_seconds When this file was written (a file that stops changing belongs to a "
         "process that ended).\n";
  out += "# TYPE icn_metrics_timestamp_seconds gauge\n";
  std::string nodeLabel = "{";
  appendLabel(nodeLabel, "node", node);
  appendLabel(nodeLabel, "pid", std::to_string(getpid()));
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char ts[64];
  snprintf(ts, sizeof ts, "} %.3f\n", now);
  out += "icn_metrics_timestamp_seconds" + nodeLabel + ts;
  return out;
}

bool writeFile(const std::string& path, std::string* why) {
  if (path.empty()) {
    if (why) *why = "no path";
    return false;
  }
  // 0644: node_exporter usually runs as another user.
  return privfile::writeAtomic(path, render(), /*sync=*/false, why, 0644) == Status::Ok;
}

void resetForTesting() { file().resetForTesting(); }

}  // namespace icn::telemetry::prometheus
