#include <gtest/gtest.h>

#include "support/AttentionHarness.h"

namespace foundry::test {
namespace {

void expectClose(const AttentionCase& c, const AttentionResult& r) {
  EXPECT_EQ(r.error.nonFinite, 0u) << describe(c, r);
  EXPECT_LE(r.error.maxRel, relativeBound(c.dtype)) << describe(c, r);
}

TEST(AttentionSmoke, Decode) {
  AttentionCase c;
  c.heads = 4; c.kvHeads = 1; c.qLen = 1; c.kvLen = 100; c.headDim = 64;
  expectClose(c, runFlash(c, RuntimeOptions()));
}

TEST(AttentionSmoke, Prefill) {
  AttentionCase c;
  c.heads = 4; c.kvHeads = 2; c.qLen = 33; c.kvLen = 40; c.headDim = 64;
  expectClose(c, runFlash(c, RuntimeOptions()));
}

TEST(AttentionSmoke, Reference) {
  AttentionCase c;
  c.heads = 4; c.kvHeads = 2; c.qLen = 7; c.kvLen = 40; c.headDim = 64;
  expectClose(c, runReference(c));
}

}  // namespace
}  // namespace foundry::test
