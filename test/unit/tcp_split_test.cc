// Cutting a large message over the helper lanes of several rails (splitOverRails): which lanes take a piece and how
// big each is.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "transport/tcp/tcp_split.h"

namespace icn::tcp {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kChunk = 128 * kKiB;

struct Cut {
  std::vector<int> lanes;
  std::vector<size_t> sizes;
  std::map<int, size_t> perRail;  // bytes per rail
};

// Lanes 1..n in the order given; rails[k], weights[k] and the bytes it holds (holds[k], none when not given) for
// the k-th.
Cut split(size_t size, const std::vector<int>& lanes, const std::vector<int>& rails, const std::vector<double>& w,
          const std::vector<double>& holds = {}) {
  std::vector<SplitCandidate> c;
  for (size_t k = 0; k < lanes.size(); k++)
    c.push_back(SplitCandidate{lanes[k], rails[k], w[k], k < holds.size() ? holds[k] : 0.0});
  std::vector<size_t> sizes(c.size(), 0);
  const size_t n = splitOverRails(size, kChunk, c.data(), c.size(), sizes.data());
  Cut out;
  size_t sum = 0;
  for (size_t k = 0; k < n; k++) {
    out.lanes.push_back(c[k].lane);
    out.sizes.push_back(sizes[k]);
    out.perRail[c[k].rail] += sizes[k];
    sum += sizes[k];
    if (k + 1 < n) {
      EXPECT_EQ(sizes[k] % 4096, 0u) << "piece " << k << " is not page-sized";
    }
  }
  EXPECT_EQ(sum, size) << "the pieces do not add up to the message";
  return out;
}

TEST(SplitOverRails, EqualRailsShareAMessageOfAChunkPerLane) {
  // Lanes 1 and 3 on rail 0, 2 and 4 on rail 1.
  const Cut c = split(512 * kKiB, {1, 2, 3, 4}, {0, 1, 0, 1}, {100, 100, 100, 100});
  EXPECT_EQ(c.lanes.size(), 4u);
  EXPECT_EQ(c.perRail.at(0), 256 * kKiB);
  EXPECT_EQ(c.perRail.at(1), 256 * kKiB);
}

// A rail measured at half the other's rate: four pieces would give its lanes under a chunk each. It keeps one lane
// and a third of the message: a rail that sits out goes unmeasured, and its estimate stays low.
TEST(SplitOverRails, ASlowerRailKeepsItsShareOfAMessageOfFewChunks) {
  const Cut c = split(512 * kKiB, {1, 3, 2, 4}, {0, 0, 1, 1}, {100, 100, 50, 50});
  ASSERT_EQ(c.perRail.count(1), 1u) << "the slower rail carries nothing";
  EXPECT_NEAR(static_cast<double>(c.perRail.at(1)), 512.0 * kKiB / 3, 4096);
  for (size_t s : c.sizes) EXPECT_GE(s, kChunk);
}

TEST(SplitOverRails, AMessageOfTwoChunksGoesOverBothRails) {
  const Cut c = split(256 * kKiB, {1, 3, 2, 4}, {0, 0, 1, 1}, {100, 100, 100, 100});
  ASSERT_EQ(c.lanes.size(), 2u);
  EXPECT_EQ(c.perRail.at(0), 128 * kKiB);
  EXPECT_EQ(c.perRail.at(1), 128 * kKiB);
  EXPECT_EQ(c.lanes[0], 1) << "the lane that would finish first keeps its piece";
}

TEST(SplitOverRails, AMessageOfOnePieceGoesToTheLaneThatWouldFinishFirst) {
  const Cut c = split(100 * kKiB, {4, 1, 3, 2}, {1, 0, 0, 1}, {100, 100, 100, 100});
  ASSERT_EQ(c.lanes.size(), 1u);
  EXPECT_EQ(c.lanes[0], 4);
  EXPECT_EQ(c.sizes[0], 100 * kKiB);
}

// Back-to-back messages of a chunk: the rail measured a little slower is free while the other still holds a
// message; the next one goes to the free rail, or only one rail would carry them.
TEST(SplitOverRails, AMessageOfOnePieceGoesToTheFreeRailThoughItMeasuresALittleSlower) {
  const Cut c = split(128 * kKiB, {2, 4, 1, 3}, {1, 1, 0, 0}, {59, 59, 62, 62}, {0, 0, 128 * kKiB, 128 * kKiB});
  ASSERT_EQ(c.lanes.size(), 1u);
  EXPECT_EQ(c.perRail.count(1), 1u) << "the message waits behind the busy rail's";
  EXPECT_EQ(c.lanes[0], 2);
}

// A free rail at a tenth of the other's rate would take longer over the whole message than the busy one.
TEST(SplitOverRails, AMessageOfOnePieceWaitsForAMuchFasterRail) {
  const Cut c = split(128 * kKiB, {2, 1}, {1, 0}, {20, 200}, {0, 128 * kKiB});
  ASSERT_EQ(c.lanes.size(), 1u);
  EXPECT_EQ(c.lanes[0], 1);
}

// Three rails, each with one lane and a message too small for three pieces: the lane with the most work queued sits
// out first.
TEST(SplitOverRails, TheLaneWithTheMostWorkQueuedSitsOutFirst) {
  const Cut c = split(256 * kKiB, {1, 2, 3}, {0, 1, 2}, {100, 100, 100}, {0, 512 * kKiB, 0});
  ASSERT_EQ(c.lanes.size(), 2u);
  EXPECT_EQ(c.perRail.count(1), 0u) << "the busiest rail kept a piece";
}

// Equal rails, one lane still holding 1 MiB of an earlier message: the others take more of the new one, so that all
// would finish together, instead of the message waiting for the lane behind.
TEST(SplitOverRails, ALaneBehindGetsLessSoThatAllFinishTogether) {
  const Cut c = split(4 * 1024 * kKiB, {1, 2, 3, 4}, {0, 1, 0, 1}, {100, 100, 100, 100}, {0, 0, 0, 1024 * kKiB});
  ASSERT_EQ(c.lanes.size(), 4u);
  // (4 MiB + 1 MiB) / 4 = 1.25 MiB each in all: lane 4 gets 0.25 MiB, the others 1.25 MiB.
  EXPECT_NEAR(static_cast<double>(c.sizes[3]), 256.0 * kKiB, 4096);
  for (size_t k = 0; k < 3; k++) EXPECT_NEAR(static_cast<double>(c.sizes[k]), 1280.0 * kKiB, 4096);
}

// A lane so far behind that its share would be under a chunk sits the message out.
TEST(SplitOverRails, ALaneFarBehindSitsOut) {
  const Cut c = split(1024 * kKiB, {1, 2, 3, 4}, {0, 1, 0, 1}, {100, 100, 100, 100}, {0, 0, 0, 4096 * kKiB});
  ASSERT_EQ(c.lanes.size(), 3u);
  for (int lane : c.lanes) EXPECT_NE(lane, 4);
  for (size_t s : c.sizes) EXPECT_GE(s, kChunk);
}

TEST(SplitOverRails, RailsInProportionToTheirRatesForALargeMessage) {
  const Cut c = split(12 * 1024 * kKiB, {1, 3, 2, 4}, {0, 0, 1, 1}, {200, 200, 100, 100});
  EXPECT_EQ(c.lanes.size(), 4u);
  EXPECT_NEAR(static_cast<double>(c.perRail.at(0)) / static_cast<double>(c.perRail.at(1)), 2.0, 0.01);
}

TEST(SplitOverRails, ALaneUnderAnEighthOfTheFastestSitsOut) {
  const Cut c = split(12 * 1024 * kKiB, {1, 3, 2, 4}, {0, 0, 1, 1}, {100, 100, 10, 10});
  EXPECT_EQ(c.perRail.count(1), 0u);
  EXPECT_EQ(c.perRail.at(0), 12 * 1024 * kKiB);
}

// A rail whose whole share would be under a chunk leaves the message to the other.
TEST(SplitOverRails, ARailWhoseShareIsUnderAChunkSitsOut) {
  const Cut c = split(256 * kKiB, {1, 2}, {0, 1}, {100, 40});
  ASSERT_EQ(c.lanes.size(), 1u);
  EXPECT_EQ(c.lanes[0], 1);
}

TEST(SplitOverRails, OneRailCutsInEqualPiecesInTheOrderGiven) {
  const Cut c = split(300 * kKiB, {3, 1, 2}, {0, 0, 0}, {1, 1, 1});
  ASSERT_EQ(c.lanes.size(), 2u) << "one piece per whole chunk";
  EXPECT_EQ(c.lanes[0], 3);
  EXPECT_EQ(c.lanes[1], 1);
  EXPECT_EQ(c.sizes[0], 148 * kKiB);
}

}  // namespace
}  // namespace icn::tcp
