// KvShards: position ranges over ranks, even and given, and who owns a position.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/runner/KvShards.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(KvShards, EvenRangesGiveTheRemainderToTheFirstRanks) {
  const KvShards s = KvShards::even(100, 3);
  EXPECT_EQ(s.describe(), "[0, 34) [34, 67) [67, 100)");
  EXPECT_EQ(s.capacity(), 100u);
  EXPECT_EQ(s.owner(0), 0u);
  EXPECT_EQ(s.owner(33), 0u);
  EXPECT_EQ(s.owner(34), 1u);
  EXPECT_EQ(s.owner(99), 2u);
  // A sequence of 50 positions: rank 0 holds 34 keys, rank 1 the other 16, rank 2 none yet.
  EXPECT_EQ(s.keysHeld(0, 50), 34u);
  EXPECT_EQ(s.keysHeld(1, 50), 16u);
  EXPECT_EQ(s.keysHeld(2, 50), 0u);
  EXPECT_EQ(s.keysHeld(2, 100), 33u);
}

TEST(KvShards, GivenSizesMayBeEmpty) {
  const KvShards s = KvShards::ofSizes({0, 5, 0, 3});
  EXPECT_EQ(s.describe(), "[0, 0) [0, 5) [5, 5) [5, 8)");
  EXPECT_EQ(s.owner(0), 1u);
  EXPECT_EQ(s.owner(5), 3u);
  EXPECT_EQ(s.keysHeld(0, 8), 0u);
  EXPECT_EQ(s.keysHeld(2, 8), 0u);
  EXPECT_EQ(KvShards::even(2, 3).describe(), "[0, 1) [1, 2) [2, 2)");
}

TEST(KvShards, CausallyBalancedRangesShrinkWithTheRank) {
  // Ends at 131072 * sqrt((r + 1) / 4): every range the same number of visible query-key pairs.
  const KvShards s = KvShards::causalBalanced(131072, 4);
  EXPECT_EQ(s.describe(), "[0, 65536) [65536, 92682) [92682, 113512) [113512, 131072)");
  for (std::uint32_t r = 0; r < 4; ++r) {
    const double pairs = (double(s.shard(r).end) * s.shard(r).end - double(s.shard(r).begin) * s.shard(r).begin) / 2;
    EXPECT_NEAR(pairs / (131072.0 * 131072.0 / 8), 1.0, 1e-4) << "rank " << r;
  }
  EXPECT_EQ(KvShards::causalBalanced(3, 4).describe(), "[0, 2) [2, 2) [2, 3) [3, 3)");
  EXPECT_EQ(KvShards::causalBalanced(5, 1).describe(), "[0, 5)");
}

TEST(KvShards, RefusesNoRanksAndPositionsPastTheCapacity) {
  EXPECT_THAT([] { KvShards::even(10, 0); }, ThrowsMessage<UserError>(HasSubstr("0 ranks cannot hold a KV cache")));
  EXPECT_THAT([] { KvShards::ofSizes({}); }, ThrowsMessage<UserError>(HasSubstr("no ranks")));
  EXPECT_THAT([] { KvShards::even(10, 2).owner(10); },
              ThrowsMessage<UserError>(HasSubstr("position 10 is past the sharded cache's capacity 10 ([0, 5) [5, 10))")));
}

}  // namespace
}  // namespace foundry
