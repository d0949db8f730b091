// Host-side helpers of the scale-up probes: NVLink generation and per-link rate as icn-nvlink-bw derives them
// (NVML's NVLink version is an enum, 6 meaning NVLink 4.0, not a generation, and a driver may report no link speed:
// the rate then comes from the decoded generation), and the JSON escaping of probe reports.
#include <gtest/gtest.h>

#include "nvml_dl.h"
#include "probe_util.h"

using icnprobe::nvlinkGenerationFromComputeCapability;
using icnprobe::nvlinkGenerationFromNvml;
using icnprobe::nvlinkGenerationGBps;

TEST(NvlinkRate, NvmlEnumIsDecodedToGenerations) {
  EXPECT_EQ(nvlinkGenerationFromNvml(1), 1);
  EXPECT_EQ(nvlinkGenerationFromNvml(2), 2);
  EXPECT_EQ(nvlinkGenerationFromNvml(3), 2);  // 2.2
  EXPECT_EQ(nvlinkGenerationFromNvml(4), 3);
  EXPECT_EQ(nvlinkGenerationFromNvml(5), 3);  // 3.1
  EXPECT_EQ(nvlinkGenerationFromNvml(6), 4);  // what H200s report
  EXPECT_EQ(nvlinkGenerationFromNvml(7), 5);
  EXPECT_EQ(nvlinkGenerationFromNvml(0), 0);
  EXPECT_EQ(nvlinkGenerationFromNvml(42), 0);
}

TEST(NvlinkRate, ComputeCapabilityGivesTheGeneration) {
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(6, 0), 1);
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(6, 1), 0);  // consumer Pascal: no NVLink
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(7, 0), 2);
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(8, 0), 3);
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(9, 0), 4);
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(10, 0), 5);
  EXPECT_EQ(nvlinkGenerationFromComputeCapability(0, 0), 0);
}

TEST(NvlinkRate, H200PeakIs450GBpsPerDirection) {
  int gen = nvlinkGenerationFromNvml(6);
  ASSERT_EQ(gen, nvlinkGenerationFromComputeCapability(9, 0));
  EXPECT_DOUBLE_EQ(18 * nvlinkGenerationGBps(gen), 450.0);
  EXPECT_DOUBLE_EQ(nvlinkGenerationGBps(5), 50.0);
  EXPECT_DOUBLE_EQ(nvlinkGenerationGBps(0), 0.0);
}

TEST(ProbeJson, NotesAreEscapedWithoutQuotes) {
  // Probe reports splice notes into JSON strings they quote themselves.
  EXPECT_EQ(icnprobe::jsonEscape("peer \"1\"\n\ttab\\"), "peer \\\"1\\\"\\n\\ttab\\\\");
  EXPECT_EQ(icnprobe::jsonEscape(std::string("a\x01", 2)), "a\\u0001");
  EXPECT_EQ(icnprobe::jsonEscape(""), "");
}
