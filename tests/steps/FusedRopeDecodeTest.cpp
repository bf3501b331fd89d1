// RoPE fused into decode (HeadLayout -> Rope -> FlashDecodeFused) against the CPU float64 reference,
// and against the unfused device path: RopeStep on Q in place, then FlashAttentionStep without RoPE.
#include <gtest/gtest.h>

#include "support/AttentionHarness.h"

namespace foundry::test {
namespace {

constexpr Layout HM = Layout::HeadMajor;
constexpr Layout TM = Layout::TokenMajor;

AttentionCase decode(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t kvLen,
                     std::uint32_t headDim, DType dtype, Layout layout = HM) {
  AttentionCase c = attentionCase(batch, heads, kvHeads, 1, kvLen, headDim, dtype, layout, layout);
  c.seed = 500 + kvLen + headDim + heads;
  return c;
}

RopeSpec rope(RopePairing pairing, std::uint32_t rotaryDims = 0) {
  RopeSpec s;
  s.pairing = pairing;
  s.rotaryDims = rotaryDims;
  return s;
}

RopeSpec llama3() {
  RopeSpec s;
  s.theta = 500000.0;
  s.llama3 = Llama3Scaling{};
  return s;
}

struct RopeCase {
  AttentionCase shape;
  RopeSpec rope;
  AttentionOptions options;
  std::uint32_t minSplits = 1;  ///< the plan must split K at least this much
  std::string name() const {
    const std::string knobs = optionsName(options);
    return shape.name() + "__" + ropeName(rope) + (knobs == "auto" ? "" : "__" + knobs);
  }
};

void PrintTo(const RopeCase& c, std::ostream* os) { *os << c.name(); }

AttentionOptions scalarSplit() {
  AttentionOptions o;
  o.faDecodeScalar = true;
  o.faDecodeSplitK = 3;
  return o;
}

AttentionOptions keys2vec2Half() {
  AttentionOptions o;
  o.faDecodeKeysPerWarp = 2;
  o.faDecodeVectorWidth = 2;
  o.faDecodeTgOut = PartialStorage::Half;
  return o;
}

// D80 rows as whole loads and a word per lane (the Hopper D80 plan).
AttentionOptions tailWords() {
  AttentionOptions o;
  o.faDecodeTailWords = Force::On;
  return o;
}

// And scores summed once per key, a lane pair weighing each head's (the Hopper D80 plan): 4 steps, and
// the Selector's 8 lanes of 10 elements per key (a forced key count would fit one subgroup size only).
AttentionOptions tailWordsScattered() {
  AttentionOptions o = tailWords();
  o.faDecodeScatter = Force::On;
  o.faDecodeUnroll = 4;
  return o;
}

std::string caseName(const ::testing::TestParamInfo<RopeCase>& param) { return param.param.name(); }

class FusedRopeDecode : public ::testing::TestWithParam<RopeCase> {};

TEST_P(FusedRopeDecode, MatchesCpuAndRopeThenDecode) {
  const RopeCase& rc = GetParam();
  const AttentionCase& c = rc.shape;
  const AttentionResult fused = runFlash(c, rc.options, rc.rope);
  const AttentionResult unfused = runRopeThenFlash(c, rc.options, rc.rope);

  // The fused kernel really has RoPE in it, and the unfused one has not.
  ASSERT_FALSE(fused.record.kernels.empty());
  ASSERT_FALSE(unfused.record.kernels.empty());
  EXPECT_NE(fused.record.kernels[0].find("Rope"), std::string::npos) << fused.record.kernels[0];
  EXPECT_EQ(unfused.record.kernels[0].find("Rope"), std::string::npos) << unfused.record.kernels[0];
  EXPECT_EQ(fused.record.plan.splits, unfused.record.plan.splits);
  EXPECT_GE(fused.record.plan.splits, rc.minSplits) << fused.record.plan.describe();

  EXPECT_TRUE(matchesReference(c, fused)) << "fused";
  EXPECT_TRUE(matchesReference(c, unfused)) << "RopeStep then decode";
  const ErrorStats e = compareDeviceResults(fused, unfused);
  EXPECT_EQ(e.nonFinite, 0u);
  EXPECT_LE(e.maxRel, relativeBound(c, fused)) << "fused vs RopeStep then decode: max-abs " << e.maxAbs << " at "
                                              << e.worstIndex;
}

INSTANTIATE_TEST_SUITE_P(
    Specs, FusedRopeDecode,
    ::testing::Values(RopeCase{decode(1, 8, 1, 77, 128, DType::F16), rope(RopePairing::RotateHalf), {}},
                      RopeCase{decode(1, 4, 2, 100, 128, DType::F32, TM), rope(RopePairing::Interleaved), {}},
                      RopeCase{decode(1, 4, 1, 130, 128, DType::F16), rope(RopePairing::RotateHalf, 32), {}},
                      RopeCase{decode(1, 4, 4, 65, 128, DType::F32), rope(RopePairing::Interleaved, 32), {}},
                      RopeCase{decode(3, 4, 1, 50, 64, DType::F16, TM), rope(RopePairing::Interleaved, 16), {}},
                      RopeCase{decode(2, 8, 2, 90, 64, DType::F32), rope(RopePairing::RotateHalf), scalarSplit()},
                      RopeCase{decode(1, 4, 1, 70, 128, DType::F16), rope(RopePairing::RotateHalf, 32), keys2vec2Half()},
                      RopeCase{decode(1, 8, 2, 140, 80, DType::F16), rope(RopePairing::RotateHalf, 32), tailWords()},
                      RopeCase{decode(1, 8, 2, 140, 80, DType::F16), rope(RopePairing::RotateHalf, 32),
                               tailWordsScattered()},
                      // Long decode: llama3-scaled frequencies at position 2499, Split-K by the Selector.
                      RopeCase{decode(1, 8, 1, 2500, 128, DType::F16), llama3(), {}, 2}),
    caseName);

}  // namespace
}  // namespace foundry::test
