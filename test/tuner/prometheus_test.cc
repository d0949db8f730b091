// The Prometheus file's per-rail families: TCP rails by interface, verbs links by device port, each with its HELP
// and TYPE lines, and only the kinds that have counters.
#include <gtest/gtest.h>

#include <string>

#include "core/net_counters.h"
#include "telemetry/prometheus.h"

using namespace icn;

namespace {

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

TEST(Prometheus, RailsAndVerbsLinksHaveTheirOwnFamilies) {
  const std::string before = telemetry::prometheus::render();
  EXPECT_FALSE(has(before, "icn_ib_link_bytes_total")) << "no verbs link counted yet";

  auto link0 = netstats::railCounters("mlx5_3:1", RailKind::Ib);
  auto link1 = netstats::railCounters("mlx5_4:1", RailKind::Ib);
  auto rail = netstats::railCounters("mlx5_3:1", RailKind::Tcp);  // the same name as a TCP rail stays apart
  ASSERT_TRUE(link0 && link1 && rail);
  EXPECT_NE(link0.get(), rail.get());
  EXPECT_EQ(netstats::railCounters("mlx5_3:1", RailKind::Ib).get(), link0.get());
  link0->bytes += 4096;
  link1->bytes += 1 << 20;
  link1->givenUp += 1;
  link1->back += 1;
  rail->bytes += 7;

  const std::string text = telemetry::prometheus::render();
  EXPECT_TRUE(has(text, "# TYPE icn_ib_link_bytes_total counter\n")) << text;
  EXPECT_TRUE(has(text, "# TYPE icn_ib_link_lost_total counter\n")) << text;
  EXPECT_TRUE(has(text, "# TYPE icn_ib_link_readmitted_total counter\n")) << text;
  EXPECT_TRUE(has(text, "link=\"mlx5_3:1\"} 4096\n")) << text;
  EXPECT_TRUE(has(text, "icn_ib_link_bytes_total{node=")) << text;
  EXPECT_TRUE(has(text, "link=\"mlx5_4:1\"} 1048576\n")) << text;
  EXPECT_TRUE(has(text, "icn_ib_link_lost_total{")) << text;
  EXPECT_TRUE(has(text, "interface=\"mlx5_3:1\"} 7\n")) << "the TCP rail under its own family";
  for (const char* family : {"icn_ib_link_bytes_total", "icn_tcp_rail_bytes_total"})
    EXPECT_TRUE(has(text, std::string("# HELP ") + family + " ")) << family;
}
