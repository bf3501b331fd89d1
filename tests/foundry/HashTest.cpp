#include <gtest/gtest.h>

#include "foundry/Hash.h"

namespace foundry {
namespace {

TEST(Hash, MatchesPublishedFnv1a128Vectors) {
  EXPECT_EQ(hashHex(""), "6c62272e07bb014262b821756295c58d");
  EXPECT_EQ(hashHex("a"), "d228cb696f1a8caf78912b704e4a8964");
  EXPECT_EQ(hashHex("foobar"), "343e1662793c64bf6f0d3597ba446f18");
}

TEST(Hash, FieldsAreLengthPrefixed) {
  EXPECT_NE(Hasher().field("ab").field("c").hex(), Hasher().field("a").field("bc").hex());
}

}  // namespace
}  // namespace foundry
