// icn-topo: show | doctor | xml | graph. Exit codes: 0 ok, 1 doctor found problems, 2 usage or input error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "topo/doctor.h"
#include "topo/graph.h"
#include "topo/nccl_xml.h"
#include "topo/probe.h"
#include "topo/show.h"

using namespace icn::topo;

namespace {

const char* kUsage =
    "usage: icn-topo <command> [options]\n"
    "commands:\n"
    "  show [--json]                      GPU/NIC/CPU matrix, PCIe and NVLink state\n"
    "  doctor [--app-cpus LIST] [--gpu N] check the classic misconfigurations (exit 1 when found)\n"
    "  xml [-o FILE]                      NCCL_TOPO_FILE for this machine (or --hwloc-xml's)\n"
    "  graph --heatmap FILE... [--comm ID] [--nchannels N] [--speed-intra GBs] [--type-intra T]\n"
    "        [--devs D0,D1,...] [-o FILE]  NCCL_GRAPH_FILE whose ring keeps heavy pairs adjacent\n"
    "probe options (all commands):\n"
    "  --hwloc-xml FILE   describe the machine in an hwloc XML export instead of this one\n"
    "  --sys-root DIR     read /sys and /proc under DIR (recorded trees)\n"
    "  --facts FILE       recorded NVML/ibverbs facts (JSON)\n"
    "  --env-file FILE    KEY=VALUE lines to check instead of this process's environment\n"
    "  --status-pid PID   check the CPU/memory binding of /proc/PID (default: this process)\n";

struct Args {
  std::string cmd;
  std::map<std::string, std::string> opts;
  std::vector<std::string> heatmaps;
  bool json = false;
};

bool takesValue(const std::string& o) {
  static const char* v[] = {"--hwloc-xml", "--sys-root", "--facts", "--env-file", "--status-pid", "--app-cpus",
                            "--gpu", "-o", "--comm", "--nchannels", "--speed-intra", "--type-intra", "--devs",
                            "--heatmap"};
  for (const char* x : v)
    if (o == x) return true;
  return false;
}

std::optional<Args> parseArgs(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  Args a;
  a.cmd = argv[1];
  for (int i = 2; i < argc; i++) {
    std::string o = argv[i];
    if (o == "--json") {
      a.json = true;
    } else if (takesValue(o)) {
      if (i + 1 >= argc) {
        fprintf(stderr, "icn-topo: %s needs a value\n", o.c_str());
        return std::nullopt;
      }
      if (o == "--heatmap") a.heatmaps.push_back(argv[++i]);
      else a.opts[o] = argv[++i];
    } else if (a.cmd == "graph" && !o.empty() && o[0] != '-') {
      a.heatmaps.push_back(o);  // extra heatmap files after --heatmap
    } else {
      fprintf(stderr, "icn-topo: unknown option %s\n", o.c_str());
      return std::nullopt;
    }
  }
  return a;
}

bool readEnvFile(const std::string& path, std::map<std::string, std::string>& env) {
  std::ifstream f(path);
  if (!f) return false;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return true;
}

bool writeOut(const Args& a, const std::string& text) {
  auto it = a.opts.find("-o");
  if (it == a.opts.end() || it->second == "-") {
    fwrite(text.data(), 1, text.size(), stdout);
    return true;
  }
  std::ofstream f(it->second, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) {
    fprintf(stderr, "icn-topo: cannot write %s\n", it->second.c_str());
    return false;
  }
  return true;
}

int run(const Args& a) {
  if (a.cmd != "show" && a.cmd != "doctor" && a.cmd != "xml" && a.cmd != "graph") {
    fprintf(stderr, "icn-topo: unknown command %s\n%s", a.cmd.c_str(), kUsage);
    return 2;
  }
  if (a.cmd == "graph" && a.heatmaps.empty()) {
    fprintf(stderr, "icn-topo: graph needs --heatmap FILE\n");
    return 2;
  }
  ProbeOptions po;
  auto opt = [&](const char* k) -> const std::string* {
    auto it = a.opts.find(k);
    return it == a.opts.end() ? nullptr : &it->second;
  };
  if (auto v = opt("--hwloc-xml")) po.hwlocXml = *v;
  if (auto v = opt("--sys-root")) po.sysRoot = *v;
  if (auto v = opt("--facts")) po.factsFile = *v;
  if (auto v = opt("--status-pid")) po.statusPid = *v;
  if (auto v = opt("--env-file")) {
    std::map<std::string, std::string> env;
    if (!readEnvFile(*v, env)) {
      fprintf(stderr, "icn-topo: cannot read %s\n", v->c_str());
      return 2;
    }
    po.env = env;
  }
  Machine m;
  std::string err;
  if (!icn::ok(probe(po, m, err))) {
    fprintf(stderr, "icn-topo: %s\n", err.c_str());
    return 2;
  }
  if (a.cmd == "show") return writeOut(a, a.json ? showJson(m) : showText(m)) ? 0 : 2;
  if (a.cmd == "doctor") {
    DoctorOptions d;
    if (auto v = opt("--app-cpus")) {
      d.appCpus = CpuSet::parseList(*v);
      if (!d.appCpus) {
        fprintf(stderr, "icn-topo: bad --app-cpus list %s\n", v->c_str());
        return 2;
      }
    }
    if (auto v = opt("--gpu")) d.gpu = atoi(v->c_str());
    std::vector<Finding> f = runDoctor(m, d);
    if (!writeOut(a, formatFindings(f))) return 2;
    return doctorExitCode(f);
  }
  if (a.cmd == "xml") {
    std::string xml;
    if (!icn::ok(writeTopologyXml(m, xml, err))) {
      fprintf(stderr, "icn-topo: %s\n", err.c_str());
      return 2;
    }
    return writeOut(a, xml) ? 0 : 2;
  }
  if (a.cmd == "graph") {
    std::map<std::string, CommTraffic> comms;
    if (!icn::ok(loadHeatmaps(a.heatmaps, comms, err))) {
      fprintf(stderr, "icn-topo: %s\n", err.c_str());
      return 2;
    }
    const CommTraffic* t = nullptr;
    if (auto v = opt("--comm")) {
      auto it = comms.find(*v);
      if (it == comms.end()) {
        fprintf(stderr, "icn-topo: communicator %s not in the heatmaps\n", v->c_str());
        return 2;
      }
      t = &it->second;
    } else {
      for (const auto& [id, c] : comms)  // the busiest communicator
        if (!t || c.total() > t->total() || (c.total() == t->total() && c.nranks > t->nranks)) t = &c;
    }
    if (!t) {
      fprintf(stderr, "icn-topo: the heatmaps contain no communicator\n");
      return 2;
    }
    GraphParams gp;
    if (auto v = opt("--nchannels")) gp.nchannels = atoi(v->c_str());
    if (auto v = opt("--speed-intra")) gp.speedIntra = atof(v->c_str());
    if (auto v = opt("--type-intra")) gp.typeIntra = *v;
    if (auto v = opt("--devs")) {
      std::stringstream ss(*v);
      for (std::string tok; std::getline(ss, tok, ',');) gp.devs.push_back(atoi(tok.c_str()));
    }
    std::vector<int> ring = ringOrder(*t);
    std::string xml;
    if (!icn::ok(writeGraphXml(*t, ring, m, gp, xml, err))) {
      fprintf(stderr, "icn-topo: %s\n", err.c_str());
      return 2;
    }
    std::string order;
    for (int r : ring) order += (order.empty() ? "" : " ") + std::to_string(r);
    fprintf(stderr, "icn-topo: comm %s, %d ranks, ring %s, %.0f of %.0f bytes on ring edges\n", t->commId.c_str(),
            t->nranks, order.c_str(), ringWeight(*t, ring), t->total());
    return writeOut(a, xml) ? 0 : 2;
  }
  fprintf(stderr, "icn-topo: unknown command %s\n%s", a.cmd.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs(kUsage, stdout);
    return 0;
  }
  std::optional<Args> a = parseArgs(argc, argv);
  if (!a) {
    fputs(kUsage, stderr);
    return 2;
  }
  return run(*a);
}
