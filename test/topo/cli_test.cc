// The icn-topo binary end to end: exit codes and outputs on fixtures.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "nccl_xml_validator.h"
#include "topo_test_util.h"

namespace icn::topo::test {
namespace {

struct CliRun {
  int rc = -1;
  std::string out;
};

CliRun run(const std::string& args) {
  CliRun r;
  std::string cmd = std::string(ICN_TOPO_CLI) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string dgx(const std::string& sys = "sys-dgx8") {
  return "--hwloc-xml " + fixture("dgx8.xml") + " --sys-root " + fixture(sys) + " --facts " + fixture("dgx8-facts.json");
}

TEST(Cli, ShowTextAndJson) {
  CliRun r = run("show " + dgx());
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("NV18"), std::string::npos);
  EXPECT_NE(r.out.find("GPU7"), std::string::npos);
  r = run("show --json " + dgx());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out.rfind("{\"version\":1", 0), 0u);
  EXPECT_NE(r.out.find("\"nvlink_active\":18"), std::string::npos);
}

TEST(Cli, DoctorExitCodes) {
  TempTree env;
  env.write("/empty.env", "");
  env.write("/bad.env", "NCCL_P2P_DISABLE=1\nLOCAL_RANK=1\n");
  CliRun ok = run("doctor " + dgx() + " --env-file " + env.dir() + "/empty.env");
  EXPECT_EQ(ok.rc, 0) << ok.out;
  CliRun bad = run("doctor " + dgx("sys-dgx8-misbound") + " --env-file " + env.dir() + "/bad.env");
  EXPECT_EQ(bad.rc, 1);
  for (const char* rule : {"env-p2p-disabled", "process-binding", "gpu-affinity", "nic-irq-remote"})
    EXPECT_NE(bad.out.find(rule), std::string::npos) << rule;
  EXPECT_NE(bad.out.find("evidence:"), std::string::npos);
  EXPECT_NE(bad.out.find("consequence:"), std::string::npos);
  EXPECT_NE(bad.out.find("fix:"), std::string::npos);
}

TEST(Cli, XmlAndGraphOutputsParse) {
  TempTree out;
  CliRun r = run("xml " + dgx() + " -o " + out.dir() + "/t.xml");
  EXPECT_EQ(r.rc, 0);
  std::ifstream f(out.dir() + "/t.xml");
  std::string xml((std::istreambuf_iterator<char>(f)), {});
  EXPECT_TRUE(validateNcclTopology(xml).ok) << validateNcclTopology(xml).error;
  r = run("xml --hwloc-xml " + fixture("hwloc/24em64t-2n6c2t-pci.xml"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_TRUE(validateNcclTopology(r.out).ok);
  r = run("graph --heatmap " + fixture("heatmap-moe8-0.json") + " " + fixture("heatmap-moe8-1.json") + " " + dgx());
  EXPECT_EQ(r.rc, 0);
  EXPECT_TRUE(validateNcclGraph(r.out).ok) << validateNcclGraph(r.out).error;
  r = run("graph --comm 0x2222 --heatmap " + fixture("heatmap-moe8-0.json") + " " + fixture("heatmap-moe8-1.json"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_TRUE(validateNcclGraph(r.out).ok);
}

TEST(Cli, UsageErrors) {
  EXPECT_EQ(run("").rc, 2);
  EXPECT_EQ(run("frobnicate").rc, 2);
  EXPECT_EQ(run("show --hwloc-xml").rc, 2);
  EXPECT_EQ(run("show --hwloc-xml /nonexistent.xml").rc, 2);
  EXPECT_EQ(run("graph").rc, 2);
  EXPECT_EQ(run("graph --comm 0x9 --heatmap " + fixture("heatmap-moe8-0.json")).rc, 2);
  EXPECT_EQ(run("doctor --app-cpus 5-1 --hwloc-xml " + fixture("dgx8.xml")).rc, 2);
  EXPECT_EQ(run("--help").rc, 0);
}

}  // namespace
}  // namespace icn::topo::test
