// Net counter registry and the heatmap snapshot (JSON keys the topo helper consumes).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/net_counters.h"
#include "telemetry/heatmap.h"
#include "core/json.h"

using namespace icn;
using namespace icn::telemetry;

TEST(NetCounters, ChannelsAreOrdinalsPerPeerAndDirection) {
  netstats::resetForTesting();
  NetCommInfo a{0x10, -1, 1, "hostB:42", 0, true};
  NetCommInfo b = a, c = a, d = a;
  auto ca = netstats::registerComm(a);
  auto cb = netstats::registerComm(b);
  d.isSend = false;
  auto cd = netstats::registerComm(d);
  EXPECT_EQ(a.channel, 0);
  EXPECT_EQ(b.channel, 1);
  EXPECT_EQ(d.channel, 0);
  netstats::unregisterComm(ca);
  auto cc = netstats::registerComm(c);
  EXPECT_EQ(c.channel, 0);  // the closed connection's ordinal is free again
  cb->add(100);
  cb->add(28);
  auto snap = netstats::snapshot();
  ASSERT_EQ(snap.size(), 4u);
  uint64_t bytes = 0, msgs = 0;
  for (auto& s : snap)
    if (s.info.channel == 1) bytes = s.bytes, msgs = s.messages;
  EXPECT_EQ(bytes, 128u);
  EXPECT_EQ(msgs, 2u);
  netstats::resetForTesting();
}

TEST(NetCounters, LocalRankIsAmbiguousWithTwoLocalRanks) {
  netstats::resetForTesting();
  netstats::setLocalRank(0x20, 3);
  EXPECT_EQ(netstats::localRank(0x20), 3);
  netstats::setLocalRank(0x20, 3);
  EXPECT_EQ(netstats::localRank(0x20), 3);
  netstats::setLocalRank(0x20, 4);  // both ranks of the comm in this process
  EXPECT_EQ(netstats::localRank(0x20), -1);
  EXPECT_EQ(netstats::localRank(0x99), -1);
  netstats::setLocalRank(0x30, 1);
  NetCommInfo i{0x30, -1, 0, "h:1", 0, true};
  netstats::registerComm(i);
  EXPECT_EQ(i.localRank, 1);  // filled from the profiler's knowledge
  netstats::resetForTesting();
}

TEST(Heatmap, SnapshotHasDocumentedKeys) {
  netstats::resetForTesting();
  heatmap::resetForTesting();
  auto e = heatmap::registerComm(0x1234, 0, 2);
  e->colls.add(CollKey{4, 1, 1, 21, 8}, 20.0);
  e->colls.add(CollKey{4, 1, 1, 21, 8}, 30.0);
  e->colls.add(CollKey{4, 1, 1, 21, 8}, 25.0);
  NetCommInfo info{0x1234, 0, 1, "peerhost:77", 0, true};
  auto ctr = netstats::registerComm(info);
  ctr->add(4096);
  NetCommInfo rinfo{0x1234, 0, 1, "peerhost:77", 0, false};
  netstats::registerComm(rinfo)->add(512);

  json::Value v;
  std::string why;
  ASSERT_TRUE(json::parse(heatmap::renderJson(), v, why)) << why;
  EXPECT_EQ(v.number("version", 0), 1);
  EXPECT_EQ(v.number("pid", 0), getpid());
  EXPECT_FALSE(v.string("host", "").empty());
  EXPECT_GT(v.number("time_ms", 0), 0);
  const json::Value* comms = v.get("comms");
  ASSERT_NE(comms, nullptr);
  ASSERT_EQ(comms->arr.size(), 1u);
  const json::Value& c = comms->arr[0];
  EXPECT_EQ(c.string("commId", ""), "0x1234");
  EXPECT_EQ(c.number("rank", -9), 0);
  EXPECT_EQ(c.number("nranks", 0), 2);
  const json::Value* peers = c.get("peers");
  ASSERT_NE(peers, nullptr);
  ASSERT_EQ(peers->arr.size(), 1u);
  const json::Value& p = peers->arr[0];
  EXPECT_EQ(p.number("peerRank", -9), 1);
  EXPECT_EQ(p.string("peer", ""), "peerhost:77");
  EXPECT_EQ(p.number("channel", -9), 0);
  EXPECT_EQ(p.number("send_bytes", 0), 4096);
  EXPECT_EQ(p.number("send_msgs", 0), 1);
  EXPECT_EQ(p.number("recv_bytes", 0), 512);
  EXPECT_EQ(p.number("recv_msgs", 0), 1);
  const json::Value* colls = c.get("collectives");
  ASSERT_NE(colls, nullptr);
  ASSERT_EQ(colls->arr.size(), 1u);
  const json::Value& k = colls->arr[0];
  EXPECT_EQ(k.string("coll", ""), "AllReduce");
  EXPECT_EQ(k.number("bucket_log2", 0), 21);
  EXPECT_EQ(k.string("algo", ""), "RING");
  EXPECT_EQ(k.string("proto", ""), "LL128");
  EXPECT_EQ(k.number("channels", 0), 8);
  EXPECT_EQ(k.number("count", 0), 3);
  EXPECT_DOUBLE_EQ(k.number("mean_us", 0), 25.0);
  EXPECT_DOUBLE_EQ(k.number("min_us", 0), 20.0);
  EXPECT_DOUBLE_EQ(k.number("p50_us", 0), 25.0);
  heatmap::resetForTesting();
  netstats::resetForTesting();
}

// The peer name comes from the peer's HELLO: whatever bytes it holds, the snapshot stays valid JSON and keeps them.
TEST(Heatmap, PeerNamesAreQuotedAsJsonStrings) {
  netstats::resetForTesting();
  heatmap::resetForTesting();
  auto e = heatmap::registerComm(0x99, 0, 2);
  const std::string odd = "a\"b\\c\nd\te\x01" "f:7";
  NetCommInfo info{0x99, 0, 1, odd, 0, true};
  netstats::registerComm(info)->add(1);
  json::Value v;
  std::string why;
  const std::string text = heatmap::renderJson();
  ASSERT_TRUE(json::parse(text, v, why)) << why << "\n" << text;
  const json::Value* comms = v.get("comms");
  ASSERT_TRUE(comms && comms->arr.size() == 1u);
  const json::Value* peers = comms->arr[0].get("peers");
  ASSERT_TRUE(peers && peers->arr.size() == 1u);
  EXPECT_EQ(peers->arr[0].string("peer", ""), odd);
  heatmap::resetForTesting();
  netstats::resetForTesting();
}

TEST(Heatmap, WriteIsAtomicPrivateAndReadable) {
  char dirT[] = "/tmp/icn-heatmap-test-XXXXXX";
  ASSERT_NE(mkdtemp(dirT), nullptr);
  std::string dir = dirT;
  std::string path = dir + "/snap.json";
  // Someone planted a link at the snapshot's name: the write replaces the link, never writes through it.
  std::string victim = dir + "/victim";
  { std::ofstream(victim) << "untouched"; }
  ASSERT_EQ(symlink(victim.c_str(), path.c_str()), 0);
  std::string why;
  ASSERT_TRUE(heatmap::writeSnapshot(path, &why)) << why;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  json::Value v;
  EXPECT_TRUE(json::parse(ss.str(), v, why)) << why;
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream vin(victim);
  std::string vtext;
  std::getline(vin, vtext);
  EXPECT_EQ(vtext, "untouched");
  // No temporary file is left behind.
  int entries = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
    closedir(d);
  }
  EXPECT_EQ(entries, 2) << "snap.json and victim only";
  unlink(path.c_str());
  unlink(victim.c_str());
  rmdir(dir.c_str());
  EXPECT_FALSE(heatmap::writeSnapshot("/nonexistent-dir/x.json", &why));
  EXPECT_NE(why.find("/nonexistent-dir"), std::string::npos);
}

// The default snapshot lives in a per-user directory (0700) that an existing foreign or open directory cannot
// stand in for.
TEST(Heatmap, DefaultPathIsPerUserAndChecked) {
  char rtT[] = "/tmp/icn-xdg-runtime-XXXXXX";
  ASSERT_NE(mkdtemp(rtT), nullptr);
  std::string rt = rtT;
  const char* old = getenv("XDG_RUNTIME_DIR");
  std::string saved = old ? old : "";
  setenv("XDG_RUNTIME_DIR", rt.c_str(), 1);
  std::string p = heatmap::snapshotPath();
  EXPECT_EQ(p, rt + "/icn/heatmap-" + std::to_string(getpid()) + ".json");
  struct stat st {};
  ASSERT_EQ(lstat((rt + "/icn").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Opened up behind our back: refused (and not chmod-ed back).
  ASSERT_EQ(chmod((rt + "/icn").c_str(), 0755), 0);
  EXPECT_EQ(heatmap::snapshotPath(), "");
  rmdir((rt + "/icn").c_str());
  // A symlink in its place: refused.
  ASSERT_EQ(symlink("/tmp", (rt + "/icn").c_str()), 0);
  EXPECT_EQ(heatmap::snapshotPath(), "");
  unlink((rt + "/icn").c_str());
  rmdir(rt.c_str());
  if (old) setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  else unsetenv("XDG_RUNTIME_DIR");
}
