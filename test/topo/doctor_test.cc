// Every doctor rule, firing and not firing, on fixtures (hwloc XML + recorded sysfs + facts + env).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "topo/doctor.h"
#include "topo_test_util.h"

namespace icn::topo::test {
namespace {

using Env = std::map<std::string, std::string>;

std::vector<Finding> doctor(const std::string& xml, const TempTree* sys, const std::string& facts = "dgx8-facts.json",
                            Env env = {}, DoctorOptions opt = {}) {
  std::string root = sys ? sys->dir() : "";
  Machine m = probeFixture(xml, sys ? &root : nullptr, facts, env);
  return runDoctor(m, opt);
}

int count(const std::vector<Finding>& f, const std::string& rule, Severity sev = Severity::Warning, bool anySev = true) {
  int n = 0;
  for (const Finding& x : f) {
    if (x.rule != rule || (!anySev && x.severity != sev)) continue;
    EXPECT_FALSE(x.evidence.empty());
    EXPECT_FALSE(x.consequence.empty());
    EXPECT_FALSE(x.fix.empty());
    n++;
  }
  return n;
}

std::string rules(const std::vector<Finding>& f) {
  std::string s;
  for (const Finding& x : f) s += x.rule + "(" + x.subject + ") ";
  return s;
}

class Doctor : public ::testing::Test {
 protected:
  TempTree sys{"sys-dgx8"};
};

TEST_F(Doctor, HealthyServerIsClean) {
  auto f = doctor("dgx8.xml", &sys);
  EXPECT_TRUE(f.empty()) << rules(f);
  EXPECT_EQ(doctorExitCode(f), 0);
  EXPECT_NE(formatFindings(f).find("no problems found"), std::string::npos);
}

TEST_F(Doctor, GpuNumaUnknown) {
  EXPECT_EQ(count(doctor("dgx8.xml", &sys), "gpu-numa-unknown"), 0);
  // No locality in the hwloc tree and the kernel says -1 everywhere.
  for (const auto& e : std::filesystem::recursive_directory_iterator(sys.dir() + "/sys/bus/pci/devices"))
    if (e.path().filename() == "numa_node") std::ofstream(e.path(), std::ios::trunc) << "-1\n";
  auto f = doctor("dgx8-noloc.xml", &sys);
  EXPECT_EQ(count(f, "gpu-numa-unknown"), 8) << rules(f);
  EXPECT_EQ(doctorExitCode(f), 1);
}

TEST_F(Doctor, GpuAffinity) {
  sys.write("/sys/bus/pci/devices/0000:94:00.0/local_cpulist", "0-31\n");
  auto f = doctor("dgx8.xml", &sys);
  ASSERT_EQ(count(f, "gpu-affinity"), 1) << rules(f);
  EXPECT_NE(f[0].evidence.find("0-31"), std::string::npos);
  TempTree mis{"sys-dgx8-misbound"};
  EXPECT_EQ(count(doctor("dgx8.xml", &mis), "gpu-affinity"), 4);
}

TEST_F(Doctor, ProcessBinding) {
  // Bound to socket 1 while LOCAL_RANK 0 drives GPU0 on socket 0.
  sys.write("/proc/self/status", "Cpus_allowed_list:\t16-31\nMems_allowed_list:\t1\n");
  auto f = doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"LOCAL_RANK", "0"}});
  ASSERT_EQ(count(f, "process-binding", Severity::Error, false), 1) << rules(f);
  auto pb = std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.rule == "process-binding"; });
  EXPECT_NE(pb->evidence.find("Mems_allowed_list 1 excludes node 0"), std::string::npos) << pb->evidence;
  // The same restricted cpuset makes socket-1 NIC IRQs (on 28-31) land on the job's cores.
  EXPECT_EQ(count(f, "nic-irq-app-cores"), 4) << rules(f);
  // The same binding is right for LOCAL_RANK 4 (GPU4 on socket 1) ...
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"LOCAL_RANK", "4"}}), "process-binding"), 0);
  // ... and for LOCAL_RANK 0 when CUDA_VISIBLE_DEVICES maps it to physical GPU 5.
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"LOCAL_RANK", "0"}, {"CUDA_VISIBLE_DEVICES", "5,6"}}),
                  "process-binding"),
            0);
  // Unbound processes are left to NCCL's own affinity handling.
  sys.write("/proc/self/status", "Cpus_allowed_list:\t0-31\nMems_allowed_list:\t0-1\n");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"LOCAL_RANK", "0"}}), "process-binding"), 0);
  DoctorOptions o;
  o.gpu = 0;  // no LOCAL_RANK, explicit --gpu
  sys.write("/proc/self/status", "Cpus_allowed_list:\t16-23\nMems_allowed_list:\t0-1\n");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", {}, o), "process-binding"), 1);
}

TEST_F(Doctor, PcieDegraded) {
  sys.write("/sys/bus/pci/devices/0000:13:00.0/current_link_width", "8\n");
  sys.write("/sys/bus/pci/devices/0000:45:00.0/current_link_speed", "16.0 GT/s PCIe\n");
  sys.write("/sys/bus/pci/devices/0000:c4:00.0/current_link_speed", "2.5 GT/s PCIe\n");  // idle GPU
  auto f = doctor("dgx8.xml", &sys);
  EXPECT_EQ(count(f, "pcie-degraded", Severity::Warning, false), 2) << rules(f);
  EXPECT_EQ(count(f, "pcie-degraded", Severity::Info, false), 1) << rules(f);
  // An idle GPU's lower link rate alone is a note, not a failure.
  TempTree idle{"sys-dgx8"};
  idle.write("/sys/bus/pci/devices/0000:c4:00.0/current_link_speed", "2.5 GT/s PCIe\n");
  auto g = doctor("dgx8.xml", &idle);
  EXPECT_EQ(count(g, "pcie-degraded"), 1);
  EXPECT_EQ(doctorExitCode(g), 0);
}

TEST_F(Doctor, NvlinkDown) {
  TempTree t;
  std::ifstream in(fixture("dgx8-facts.json"));
  std::string facts((std::istreambuf_iterator<char>(in)), {});
  size_t p = facts.find("\"nvlink_active\": 18", facts.find("0000:43:00.0"));
  ASSERT_NE(p, std::string::npos);
  facts.replace(p, 19, "\"nvlink_active\": 12");
  t.write("/facts.json", facts);
  ProbeOptions o;
  o.hwlocXml = fixture("dgx8.xml");
  o.sysRoot = sys.dir();
  o.factsFile = t.dir() + "/facts.json";
  o.env = Env{};
  Machine m;
  std::string err;
  ASSERT_EQ(probe(o, m, err), Status::Ok) << err;
  auto f = runDoctor(m);
  ASSERT_EQ(count(f, "nvlink-down"), 1) << rules(f);
  EXPECT_NE(f[0].evidence.find("12 of 18"), std::string::npos);
  EXPECT_EQ(count(doctor("dgx8.xml", &sys), "nvlink-down"), 0);
}

TEST_F(Doctor, GdrUnavailable) {
  sys.remove("/sys/module/nvidia_peermem");
  auto f = doctor("dgx8.xml", &sys);  // 550 driver, proprietary module: no DMA-BUF either
  ASSERT_EQ(count(f, "gdr-unavailable", Severity::Error, false), 1) << rules(f);
  EXPECT_NE(f[0].evidence.find("open kernel module"), std::string::npos);
  sys.write("/proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
  f = doctor("dgx8.xml", &sys);
  ASSERT_EQ(count(f, "gdr-unavailable"), 1);
  EXPECT_NE(f[0].evidence.find("< 5.12"), std::string::npos);
  // Open module on a recent kernel: DMA-BUF works without peermem.
  sys.write("/proc/sys/kernel/osrelease", "6.5.0\n");
  sys.write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07\n");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys), "gdr-unavailable"), 0);
}

TEST_F(Doctor, GdrDistance) {
  auto f = doctor("pcie2.xml", nullptr, "");
  EXPECT_EQ(count(f, "gdr-distance"), 2) << rules(f);  // both GPUs: the NIC is on the other socket
  EXPECT_EQ(count(doctor("dgx8.xml", &sys), "gdr-distance"), 0);
}

TEST_F(Doctor, AcsRedirect) {
  std::ifstream in(sys.dir() + "/sys/bus/pci/devices/0000:12:00.0/config", std::ios::binary);
  std::string cfg((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ(cfg.size(), 4096u);
  cfg[0x14e] = 0x1d;  // ACS control: SrcValid | ReqRedir | CmpltRedir | UpstreamFwd
  sys.write("/sys/bus/pci/devices/0000:12:00.0/config", cfg);
  auto f = doctor("dgx8.xml", &sys);
  EXPECT_EQ(count(f, "acs-redirect", Severity::Error, false), 2) << rules(f);  // GPU0 to mlx5_0 and mlx5_1
  EXPECT_NE(f[0].evidence.find("0000:12:00.0"), std::string::npos);
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json"), "acs-redirect"), 2);
  TempTree clean{"sys-dgx8"};
  EXPECT_EQ(count(doctor("dgx8.xml", &clean), "acs-redirect"), 0);
}

TEST_F(Doctor, RdmaPortDown) {
  sys.write("/sys/class/infiniband/mlx5_3/ports/1/state", "1: DOWN\n");
  auto f = doctor("dgx8.xml", &sys);
  ASSERT_EQ(count(f, "rdma-port-down"), 1) << rules(f);
  EXPECT_NE(f[0].subject.find("mlx5_3"), std::string::npos);
}

TEST_F(Doctor, RoceMtu) {
  TempTree facts;
  facts.write("/f.json", R"({"rdma":[{"device":"mlx5_0","port":1,"active_mtu":1024}]})");
  sys.write("/sys/class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet\n");
  sys.write("/sys/class/net/ib0/mtu", "1500\n");
  ProbeOptions o;
  o.hwlocXml = fixture("dgx8.xml");
  o.sysRoot = sys.dir();
  o.factsFile = facts.dir() + "/f.json";
  o.env = Env{};
  Machine m;
  std::string err;
  ASSERT_EQ(probe(o, m, err), Status::Ok) << err;
  auto f = runDoctor(m);
  ASSERT_EQ(count(f, "roce-mtu"), 1) << rules(f);
  EXPECT_NE(f[0].evidence.find("mtu 1500"), std::string::npos);
  // Jumbo netdev but the port still runs 1024: mismatch.
  sys.write("/sys/class/net/ib0/mtu", "9000\n");
  ASSERT_EQ(probe(o, m, err), Status::Ok);
  f = runDoctor(m);
  ASSERT_EQ(count(f, "roce-mtu"), 1);
  EXPECT_NE(f[0].evidence.find("allows 4096"), std::string::npos);
  facts.write("/f.json", R"({"rdma":[{"device":"mlx5_0","port":1,"active_mtu":4096}]})");
  ASSERT_EQ(probe(o, m, err), Status::Ok);
  EXPECT_EQ(count(runDoctor(m), "roce-mtu"), 0);
}

TEST_F(Doctor, NicIrqs) {
  EXPECT_EQ(count(doctor("dgx8.xml", &sys), "nic-irq-remote"), 0);
  TempTree mis{"sys-dgx8-misbound"};
  EXPECT_EQ(count(doctor("dgx8.xml", &mis), "nic-irq-remote"), 8);
  // IRQs on cores 12-15 (NIC-local): fine unless the job runs there.
  DoctorOptions app;
  app.appCpus = *CpuSet::parseList("0-11");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", {}, app), "nic-irq-app-cores"), 0);
  app.appCpus = *CpuSet::parseList("8-15");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", {}, app), "nic-irq-app-cores"), 4);
}

TEST_F(Doctor, EnvP2pDisabled) {
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_P2P_DISABLE", "1"}}), "env-p2p-disabled",
                  Severity::Error, false),
            1);
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_P2P_LEVEL", "LOC"}}), "env-p2p-disabled"), 1);
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_P2P_DISABLE", "0"}}), "env-p2p-disabled"), 0);
  // Without NVLink (PCIe GPUs) disabling P2P is a choice, not a contradiction.
  EXPECT_EQ(count(doctor("pcie2.xml", nullptr, "", Env{{"NCCL_P2P_DISABLE", "1"}}), "env-p2p-disabled"), 0);
}

TEST_F(Doctor, EnvIbDisabled) {
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_IB_DISABLE", "1"}}), "env-ib-disabled"), 1);
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_IB_DISABLE", "0"}}), "env-ib-disabled"), 0);
  for (int n = 0; n < 8; n++)
    sys.write("/sys/class/infiniband/mlx5_" + std::to_string(n) + "/ports/1/state", "1: DOWN\n");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_IB_DISABLE", "1"}}), "env-ib-disabled"), 0);
}

TEST_F(Doctor, EnvGdrLevel) {
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_NET_GDR_LEVEL", "LOC"}}), "env-gdr-level"), 1);
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_NET_GDR_LEVEL", "PXB"}}), "env-gdr-level"), 0);
}

TEST_F(Doctor, EnvTopoFile) {
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_TOPO_FILE", "/nonexistent/topo.xml"}}),
                  "env-topo-file"),
            1);
  sys.write("/topo.xml", "<system version=\"1\"/>\n");
  EXPECT_EQ(count(doctor("dgx8.xml", &sys, "dgx8-facts.json", Env{{"NCCL_TOPO_FILE", sys.dir() + "/topo.xml"}}),
                  "env-topo-file"),
            0);
}

TEST(DoctorRules, EveryRuleHasATest) {
  // The list is what docs/readme/topo.md documents; a new rule must come with a test above.
  std::set<std::string> tested = {"gpu-numa-unknown", "gpu-affinity", "process-binding", "pcie-degraded",
                                  "nvlink-down", "gdr-unavailable", "gdr-distance", "acs-redirect",
                                  "rdma-port-down", "roce-mtu", "nic-irq-remote", "nic-irq-app-cores",
                                  "env-p2p-disabled", "env-ib-disabled", "env-gdr-level", "env-topo-file"};
  for (const std::string& r : doctorRules()) EXPECT_TRUE(tested.count(r)) << r;
  EXPECT_EQ(doctorRules().size(), tested.size());
}

}  // namespace
}  // namespace icn::topo::test
