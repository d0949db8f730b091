// libicn-shim.so (LD_PRELOAD) and libnccl-env-icn.so (NCCL_ENV_PLUGIN) against a stand-in NCCL.
// Each case runs the app in a fresh process with a controlled environment and reads what "NCCL" saw.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nccl_xml_validator.h"

namespace {

using Env = std::map<std::string, std::string>;
using Record = std::map<std::string, std::string>;

std::string fixture(const std::string& n) { return std::string(ICN_TOPO_FIXTURES) + "/" + n; }

struct Scratch {
  std::string dir;
  Scratch() {
    char t[] = "/tmp/icn-shim-test-XXXXXX";
    dir = mkdtemp(t);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string read(const std::string& name) const {
    std::ifstream f(dir + "/" + name);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

struct AppResult {
  int rc = -1;
  std::vector<Record> calls;
  std::string out;
};

// The sanitizer settings of this test run, passed on to the app (where the shim runs), and ASan's check that its
// runtime comes first in the library list turned off: the preloaded shim precedes it.
std::string sanitizerEnv() {
  std::string out;
  const char* asan = getenv("ASAN_OPTIONS");
  out += std::string(" 'ASAN_OPTIONS=") + (asan && *asan ? std::string(asan) + ":" : "") + "verify_asan_link_order=0'";
  for (const char* k : {"LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"})
    if (const char* v = getenv(k)) out += std::string(" '") + k + "=" + v + "'";
  return out;
}

// Runs the app under `env -i` (only the given variables) with a 60 s guard. A sanitizer report on the app's
// stderr (a leak, a bad access, undefined behaviour in the shim or the env plugin) fails the calling test.
AppResult runApp(const std::string& mode, const Env& env) {
  char errPath[] = "/tmp/icn-shim-app-err-XXXXXX";
  int errFd = mkstemp(errPath);
  if (errFd >= 0) close(errFd);
  std::string cmd = "timeout 60 env -i PATH=/usr/bin:/bin" + sanitizerEnv();
  for (const auto& [k, v] : env) cmd += " '" + k + "=" + v + "'";
  cmd += std::string(" ") + ICN_SHIM_APP + " " + mode + " 2>" + (errFd >= 0 ? errPath : "/dev/null");
  AppResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (errFd >= 0) {
    std::ifstream f(errPath);
    std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    unlink(errPath);
    if (err.find("Sanitizer") != std::string::npos) ADD_FAILURE() << "app " << mode << ": sanitizer report:\n" << err;
  }
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("FAKE call=", 0) != 0) continue;
    Record rec;
    std::istringstream words(line.substr(5));
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      if (eq != std::string::npos) rec[w.substr(0, eq)] = w.substr(eq + 1);
    }
    // topofile/graphfile carry "size:first line" which has spaces: take them from the raw line.
    for (const char* key : {"topofile=", "graphfile="}) {
      size_t p0 = line.find(key);
      size_t p1 = line.find(" graphfile=", p0 + 1);
      rec[std::string(key, strlen(key) - 1)] = line.substr(p0 + strlen(key), (key[0] == 't' ? p1 : std::string::npos) -
                                                                                     (key[0] == 't' ? p0 + strlen(key) : 0));
    }
    r.calls.push_back(rec);
  }
  return r;
}

Env preload(const Scratch& s, Env extra = {}) {
  Env e = {{"LD_PRELOAD", ICN_SHIM_LIB}, {"HWLOC_XMLFILE", fixture("dgx8.xml")}, {"FAKE_NCCL_DUMP", s.dir}};
  for (auto& [k, v] : extra) e[k] = v;
  return e;
}

void expectGeneratedTopo(const Scratch& s, const AppResult& r, size_t call = 0) {
  ASSERT_GT(r.calls.size(), call) << r.out;
  const Record& c = r.calls[call];
  EXPECT_EQ(c.at("topo").rfind("/proc/self/fd/", 0), 0u) << r.out;
  EXPECT_NE(c.at("topofile").find("<system version=\"1\" name=\"icn-topo\">"), std::string::npos) << r.out;
  std::string xml = s.read(c.at("pid") + "-topo.xml");
  auto v = icn::topo::test::validateNcclTopology(xml);
  EXPECT_TRUE(v.ok) << v.error;
  EXPECT_NE(xml.find("<net name=\"mlx5_7\"/>"), std::string::npos);  // the dgx8 fixture, via HWLOC_XMLFILE
}

TEST(Preload, InjectsAGeneratedTopologyFile) {
  Scratch s;
  AppResult r = runApp("rank", preload(s));
  EXPECT_EQ(r.rc, 0) << r.out;
  expectGeneratedTopo(s, r);
  EXPECT_EQ(r.calls.at(0).at("rawenv"), r.calls.at(0).at("topo"));  // set in the process environment
  EXPECT_EQ(r.calls.at(0).at("graph"), "(null)");
}

TEST(Preload, WithoutShimNothingIsInjected) {
  Scratch s;
  Env e = preload(s);
  e.erase("LD_PRELOAD");
  AppResult r = runApp("rank", e);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].at("topo"), "(null)");
}

TEST(Preload, RespectsTheUsersTopologyFile) {
  Scratch s;
  std::ofstream(s.dir + "/mine.xml") << "<system version=\"1\"/>\n";
  AppResult r = runApp("rank", preload(s, {{"NCCL_TOPO_FILE", s.dir + "/mine.xml"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("topo"), s.dir + "/mine.xml");
}

TEST(Preload, DisabledByIcnShimDisable) {
  Scratch s;
  AppResult r = runApp("rank", preload(s, {{"ICN_SHIM_DISABLE", "1"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("topo"), "(null)");
  EXPECT_EQ(r.rc, 0);
}

TEST(Preload, AllFourEntryPointsForwardIntact) {
  Scratch s;
  AppResult r = runApp("all4", preload(s));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("APP ok"), std::string::npos) << r.out;
  ASSERT_EQ(r.calls.size(), 4u) << r.out;
  EXPECT_EQ(r.calls[0].at("call"), "InitRank");
  EXPECT_EQ(r.calls[0].at("id"), std::to_string(7 | 0x5a << 8));
  EXPECT_EQ(r.calls[0].at("rank"), "3");
  EXPECT_EQ(r.calls[1].at("call"), "InitRankConfig");
  EXPECT_EQ(r.calls[1].at("id"), std::to_string(9 | 0x5a << 8));
  EXPECT_EQ(r.calls[2].at("call"), "InitAll");
  EXPECT_EQ(r.calls[3].at("call"), "InitRankScalable");
  EXPECT_EQ(r.calls[3].at("nranks"), "1602");  // 16 ranks, 2 ids
  EXPECT_EQ(r.calls[3].at("id"), std::to_string(11 | 0x5a << 8));
  for (const Record& c : r.calls) EXPECT_EQ(c.at("topo"), r.calls[0].at("topo"));  // one file per process
  expectGeneratedTopo(s, r);
}

TEST(Preload, ConcurrentCommunicatorsShareOneFile) {
  Scratch s;
  AppResult r = runApp("threads", preload(s));
  EXPECT_EQ(r.rc, 0) << r.out;
  ASSERT_EQ(r.calls.size(), 8u) << r.out;
  std::set<std::string> paths, ranks;
  for (const Record& c : r.calls) {
    paths.insert(c.at("topo"));
    ranks.insert(c.at("rank"));
    EXPECT_NE(c.at("topofile"), "unreadable");
  }
  EXPECT_EQ(paths.size(), 1u);
  EXPECT_EQ(ranks.size(), 8u);
  expectGeneratedTopo(s, r);
}

TEST(Preload, ChildProcessGetsItsOwnFile) {
  // torchrun-like: a worker initialises, then spawns a process that inherits NCCL_TOPO_FILE=/proc/self/fd/N.
  Scratch s;
  AppResult r = runApp("exec-child", preload(s));
  EXPECT_EQ(r.rc, 0) << r.out;
  ASSERT_EQ(r.calls.size(), 2u) << r.out;
  EXPECT_NE(r.calls[0].at("pid"), r.calls[1].at("pid"));
  expectGeneratedTopo(s, r, 0);
  expectGeneratedTopo(s, r, 1);
}

TEST(Preload, StaleInheritedPathIsReplaced) {
  Scratch s;
  AppResult r = runApp("rank", preload(s, {{"NCCL_TOPO_FILE", "/proc/self/fd/987"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_NE(r.calls[0].at("topo"), "/proc/self/fd/987");
  expectGeneratedTopo(s, r);
}

TEST(Preload, GraphFromHeatmaps) {
  Scratch s;
  AppResult r = runApp("rank", preload(s, {{"ICN_TOPO_GRAPH", fixture("heatmap-moe8-0.json") + "," +
                                                                  fixture("heatmap-moe8-1.json")}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("graph").rfind("/proc/self/fd/", 0), 0u) << r.out;
  std::string xml = s.read(r.calls[0].at("pid") + "-graph.xml");
  auto v = icn::topo::test::validateNcclGraph(xml);
  EXPECT_TRUE(v.ok) << v.error << xml;
  // The planted MoE ring 0-5-2-7-1-4-6-3 (canonical direction 0 3 6 4 1 7 2 5).
  EXPECT_NE(xml.find("<gpu dev=\"0\"/>\n      <gpu dev=\"0x3\"/>\n      <gpu dev=\"0x6\"/>"), std::string::npos) << xml;
}

TEST(Preload, GraphXmlIsPassedThroughAndUserGraphWins) {
  Scratch s;
  std::ofstream(s.dir + "/g.xml") << "<graphs version=\"1\"/>\n";
  AppResult r = runApp("rank", preload(s, {{"ICN_TOPO_GRAPH", s.dir + "/g.xml"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("graph"), s.dir + "/g.xml");
  r = runApp("rank", preload(s, {{"ICN_TOPO_GRAPH", s.dir + "/g.xml"}, {"NCCL_GRAPH_FILE", s.dir + "/user.xml"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("graph"), s.dir + "/user.xml");
}

Env envPlugin(const Scratch& s, Env extra = {}) {
  Env e = {{"NCCL_ENV_PLUGIN", "icn"}, {"LD_LIBRARY_PATH", ICN_ENV_PLUGIN_DIR},
           {"HWLOC_XMLFILE", fixture("dgx8.xml")}, {"FAKE_NCCL_DUMP", s.dir}};
  for (auto& [k, v] : extra) e[k] = v;
  return e;
}

TEST(EnvPlugin, AnswersTopoFileWithoutTouchingTheEnvironment) {
  Scratch s;
  AppResult r = runApp("all4", envPlugin(s, {{"NCCL_DEBUG", "WARN"}}));
  EXPECT_EQ(r.rc, 0) << r.out;
  ASSERT_EQ(r.calls.size(), 4u) << r.out;
  expectGeneratedTopo(s, r);
  for (const Record& c : r.calls) {
    EXPECT_EQ(c.at("rawenv"), "(null)");  // getenv untouched: the answer comes only through the plugin
    EXPECT_EQ(c.at("debug"), "WARN");     // everything else is getenv()
    EXPECT_EQ(c.at("topo"), r.calls[0].at("topo"));
  }
}

TEST(EnvPlugin, LoadsByPathToo) {
  Scratch s;
  AppResult r = runApp("rank", envPlugin(s, {{"NCCL_ENV_PLUGIN", std::string(ICN_ENV_PLUGIN_DIR) + "/libnccl-env-icn.so"},
                                             {"LD_LIBRARY_PATH", "/nonexistent"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  expectGeneratedTopo(s, r);
}

TEST(EnvPlugin, RespectsUserAndDisable) {
  Scratch s;
  AppResult r = runApp("rank", envPlugin(s, {{"NCCL_TOPO_FILE", "/user/topo.xml"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("topo"), "/user/topo.xml");
  r = runApp("rank", envPlugin(s, {{"ICN_SHIM_DISABLE", "1"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("topo"), "(null)");
  r = runApp("rank", envPlugin(s, {{"ICN_TOPO_GRAPH", fixture("heatmap-moe8-0.json")}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_EQ(r.calls[0].at("graph").rfind("/proc/self/fd/", 0), 0u) << r.out;
}

// NCCL 2.30.7+ takes ncclEnvPlugin_v2 and hands it its logger, so our init line lands in NCCL's log; an older
// NCCL takes v1 from the same library and sees the same answers.
TEST(EnvPlugin, V2ForNewerNcclV1ForOlder) {
  Scratch s;
  AppResult r = runApp("rank", envPlugin(s, {{"NCCL_DEBUG", "INFO"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_NE(r.out.find("FAKE envplugin api=v2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env plugin: loaded by NCCL 2.30.7 (env API v2)"), std::string::npos) << r.out;
  expectGeneratedTopo(s, r);
  r = runApp("rank", envPlugin(s, {{"FAKE_NCCL_ENV_API", "1"}, {"NCCL_DEBUG", "INFO"}}));
  ASSERT_EQ(r.calls.size(), 1u) << r.out;
  EXPECT_NE(r.out.find("FAKE envplugin api=v1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAKE log "), std::string::npos) << "v1 has no logger: " << r.out;
  expectGeneratedTopo(s, r);
}

}  // namespace
