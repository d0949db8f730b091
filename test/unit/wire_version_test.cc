// Each wire format's fingerprint (the values both ends must agree on, core/wire_fingerprint.h) recorded per version.
// A changed constant, record layout or message number fails here until its format's version is bumped and the new
// version's fingerprint recorded below: builds that disagree then refuse each other at connect instead of
// misreading each other's bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/handshake.h"
#include "transport/ib/ib_wire.h"
#include "transport/tcp/tcp_wire.h"
#include "tuner/agree/wire.h"

namespace {

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

// One wire format: its version now, its fingerprint now, and what each released version's fingerprint was.
void expectRecorded(const char* format, const char* versionName, unsigned version, uint64_t now,
                    const std::map<unsigned, uint64_t>& recorded) {
  auto it = recorded.find(version);
  ASSERT_NE(it, recorded.end()) << format << ": version " << version << " has no recorded fingerprint; record {"
                                << version << ", " << hex(now) << "} in " << __FILE__;
  EXPECT_EQ(hex(it->second), hex(now))
      << format << ": a wire constant changed while " << versionName << " stayed " << version << "; bump "
      << versionName << " and record {" << version + 1 << ", " << hex(now) << "} (docs/adding.md)";
  for (const auto& [v, fp] : recorded)
    if (v != version) EXPECT_NE(fp, now) << format << ": version " << v << " had this very wire";
}

TEST(WireVersion, TcpTransport) {
  expectRecorded("TCP transport", "kBlobVersion (tcp_wire.h)", icn::tcp::kBlobVersion, icn::tcp::kWireFingerprint,
                 {{3, 0xc9dd131b98ab6b37ull}, {4, 0xd8fceac410383726ull}, {5, 0xda050176d20555b5ull}, {6, 0x3407a56c418235e4ull}});
}

TEST(WireVersion, IbTransport) {
  expectRecorded("ib transport", "kBlobVersion (ib_wire.h)", icn::ib::kBlobVersion, icn::ib::kWireFingerprint,
                 {{1, 0xc688f2a361cda4d6ull}, {2, 0xac884fac44e00e0eull}, {3, 0xd259cd34dfd8edc3ull}});
}

TEST(WireVersion, Handshake) {
  expectRecorded("handshake", "kWireVersion (handshake.h)", icn::kWireVersion, icn::kWireFingerprint, {{2, 0x3aac0142b8a149c5ull}});
}

TEST(WireVersion, TunerAgreement) {
  expectRecorded("tuner agreement", "kProtocol (tuner/agree/wire.h)", icn::tuner::agree::kProtocol,
                 icn::tuner::agree::kWireFingerprint, {{2, 0x11fa1abc9908db93ull}, {3, 0x57e1992a1675e536ull}});
}

// The docs name the TCP wire limits and show their values in one generated table (docs/readme/reliability.md,
// `icn-params --wire-limits`): each row stands there as the code prints it.
TEST(WireLimits, TheDocsTableIsTheCodes) {
  std::ifstream in(std::string(ICN_SOURCE_DIR) + "/docs/readme/reliability.md");
  ASSERT_TRUE(in) << "docs/readme/reliability.md not found";
  std::stringstream doc;
  doc << in.rdbuf();
  std::istringstream rows(icn::tcp::wireLimitsMarkdown());
  std::string row;
  int checked = 0;
  while (std::getline(rows, row)) {
    if (row.rfind("| `k", 0) != 0) continue;
    checked++;
    EXPECT_NE(doc.str().find(row), std::string::npos)
        << "docs/readme/reliability.md lacks or differs from this row (icn-params --wire-limits):\n" << row;
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
