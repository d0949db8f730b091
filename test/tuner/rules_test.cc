#include <gtest/gtest.h>

#include "tuner/store/rules.h"

using namespace icn;
using namespace icn::tuner;

TEST(Rules, ParsesGoodFile) {
  const char* text =
      "# comment\n"
      "\n"
      "allreduce,0,65536,tree,ll,-1,1,2\n"
      "AllReduce,65537,-1,RING,LL128,8,-1,-1,1\n"
      "broadcast, 0 , 1024 , ring , simple , 2 , -1 , -1 , -1 , 0\n"
      "-1,0,-1,-1,simple,-1,-1,-1\n";
  std::vector<Rule> rules;
  std::string why;
  ASSERT_EQ(parseRules(text, "t.csv", &rules, &why), Status::Ok) << why;
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].coll, coll::kAllReduce);
  EXPECT_EQ(rules[0].maxBytes, 65536u);
  EXPECT_EQ(rules[0].decision.algo, coll::kTree);
  EXPECT_EQ(rules[0].decision.proto, coll::kLL);
  EXPECT_EQ(rules[0].decision.channels, 0);
  EXPECT_EQ(rules[0].nRanks, 2);
  EXPECT_EQ(rules[0].line, 3);
  EXPECT_EQ(rules[1].maxBytes, UINT64_MAX);
  EXPECT_EQ(rules[1].decision.channels, 8);
  EXPECT_EQ(rules[1].numPipeOps, 1);
  EXPECT_EQ(rules[2].coll, 0);
  EXPECT_EQ(rules[2].regBuff, 0);
  EXPECT_EQ(rules[3].coll, -1);
  EXPECT_EQ(rules[3].decision.algo, -1);
  EXPECT_EQ(rules[3].decision.proto, coll::kSimple);
}

struct BadCase {
  const char* text;
  const char* expect;  // substring of the error
};

TEST(Rules, BadFilesNameLineAndField) {
  const BadCase cases[] = {
      {"allreduce,0,10,tree,ll\n", "t.csv:1: expected 8 to 10"},
      {"# c\nallreduce,0,10,tree,ll,-1,1,2\nfoo,0,10,tree,ll,-1,1,2\n", "t.csv:3: field 1 (coll)"},
      {"allreduce,x,10,tree,ll,-1,1,2\n", "t.csv:1: field 2 (minBytes)"},
      {"allreduce,0,1e3,tree,ll,-1,1,2\n", "field 3 (maxBytes)"},
      {"allreduce,100,10,tree,ll,-1,1,2\n", "field 3 (maxBytes): maxBytes is below minBytes"},
      {"allreduce,0,10,bogus,ll,-1,1,2\n", "field 4 (algo): unknown algorithm 'bogus'"},
      {"allreduce,0,10,ring,ll256,-1,1,2\n", "field 5 (proto)"},
      {"allreduce,0,10,ring,ll,0,1,2\n", "field 6 (channels)"},
      {"allreduce,0,10,ring,ll,65,1,2\n", "field 6 (channels)"},
      {"allreduce,0,10,ring,ll,-1,one,2\n", "field 7 (nNodes)"},
      {"allreduce,0,10,ring,ll,-1,1,-5\n", "field 8 (nRanks)"},
      {"allreduce,0,10,ring,ll,-1,1,2,x\n", "field 9 (numPipeOps)"},
      {"allreduce,0,10,ring,ll,-1,1,2,1,2\n", "field 10 (regBuff)"},
      {"allreduce,0,10,ring,ll,-1,1,2,1,1,7\n", "expected 8 to 10"},
      {"allreduce,0,10,-1,-1,-1,1,2\n", "neither algorithm"},
  };
  for (const BadCase& c : cases) {
    std::vector<Rule> rules;
    std::string why;
    EXPECT_EQ(parseRules(c.text, "t.csv", &rules, &why), Status::InvalidArgument) << c.text;
    EXPECT_NE(why.find(c.expect), std::string::npos) << "got: " << why << " for " << c.text;
  }
}

TEST(Rules, MissingFileIsAnError) {
  std::vector<Rule> rules;
  std::string why;
  EXPECT_NE(loadRulesFile("/nonexistent/icn-rules.csv", &rules, &why), Status::Ok);
  EXPECT_NE(why.find("/nonexistent/icn-rules.csv"), std::string::npos);
}

TEST(Rules, TableMatchesFirstRuleInRange) {
  std::vector<Rule> rules;
  std::string why;
  ASSERT_EQ(parseRules("allreduce,0,1000,tree,ll,-1,-1,8\n"      // other nRanks: filtered out
                       "allreduce,0,1000,ring,ll,-1,-1,2\n"
                       "allreduce,0,5000,tree,simple,4,-1,-1\n"  // shadowed below 1000
                       "allreduce,0,-1,ring,simple,-1,-1,-1,2\n"
                       "allgather,0,-1,ring,ll128,-1,1,-1,-1,1\n",
                       "r", &rules, &why),
            Status::Ok)
      << why;
  RuleTable t;
  t.build(rules, /*nRanks=*/2, /*nNodes=*/1);
  EXPECT_EQ(t.size(), 4u);
  const Rule* r = t.match(coll::kAllReduce, 512, 1, 0);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->decision.algo, coll::kRing);
  EXPECT_EQ(r->line, 2);
  r = t.match(coll::kAllReduce, 1000, 1, 0);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->line, 2);  // inclusive upper bound
  r = t.match(coll::kAllReduce, 1001, 1, 0);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->line, 3);
  EXPECT_EQ(r->decision.channels, 4);
  EXPECT_EQ(t.match(coll::kAllReduce, 1 << 20, 1, 0), nullptr);  // numPipeOps 2 required
  ASSERT_NE(t.match(coll::kAllReduce, 1 << 20, 2, 0), nullptr);
  EXPECT_EQ(t.match(coll::kAllGather, 100, 1, 0), nullptr);  // regBuff 1 required
  ASSERT_NE(t.match(coll::kAllGather, 100, 1, 1), nullptr);
  EXPECT_EQ(t.match(0, 100, 1, 1), nullptr);
}
