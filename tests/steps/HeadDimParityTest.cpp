// Every head dim the kernels serve, run on the default device against the CPU float64 reference on
// fresh random inputs with NaN-poisoned outputs: decode (subgroup, scalar, Split-K, fused RoPE) and
// prefill (subgroup, Split-K; cooperative matrices where the device has them and the dim is a
// multiple of 16), f16 and f32, with GQA (which variants at which dims: cases() below). Dims that are not a multiple of the subgroup size leave
// the last lanes of the subgroup prefill a partial slice of the row; the lanes of a decode key
// cluster split the row into slices of 2 to 20 elements.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct DimCase {
  AttentionCase shape;
  RuntimeOptions options;
  std::string variant;
  bool rope = false;
  bool coopMat = false;
  std::string name() const { return shape.name() + "__" + variant; }
};

void PrintTo(const DimCase& c, std::ostream* os) { *os << c.name(); }

RuntimeOptions knobs(std::initializer_list<std::pair<std::string, std::string>> env, bool coop = false) {
  std::map<std::string, std::string> m(env.begin(), env.end());
  m.emplace("FOUNDRY_FA_PREFILL_COOPMAT", coop ? "1" : "0");
  return RuntimeOptions::fromEnvironment(m);
}

// Every dim in f16 through the default decode and prefill; three dims (a tail past the subgroup
// size, a non-power of two, the widest) through every other variant and f32.
std::vector<DimCase> cases() {
  std::vector<DimCase> out;
  std::uint32_t seed = 1;
  for (const std::uint32_t d : {32u, 40u, 72u, 80u, 96u, 112u, 160u, 192u, 256u}) {
    const bool every = d == 40 || d == 96 || d == 256;
    for (const DType t : {DType::F16, DType::F32}) {
      if (t == DType::F32 && !every) continue;
      AttentionCase dec = attentionCase(2, 8, 2, 1, 137, d, t);
      dec.seed = seed++;
      out.push_back({dec, knobs({}), "decode"});
      AttentionCase pre = attentionCase(1, 4, 2, 29, 61, d, t);
      pre.seed = seed++;
      out.push_back({pre, knobs({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}), "prefill"});
      if (t == DType::F16 && d % 16 == 0) {
        out.push_back({pre, knobs({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}, true), "prefill_coopmat", false, true});
        out.push_back({pre, knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}, true), "prefill_coopmat_splitk2", false, true});
      }
      if (!every || t == DType::F32) continue;
      out.push_back({dec, knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}), "decode_scalar"});
      out.push_back({dec, knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}),
                     "decode_splitk3"});
      out.push_back({dec, knobs({}), "decode_rope", /*rope=*/true});
      out.push_back({pre, knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}), "prefill_splitk2"});
    }
  }
  return out;
}

class HeadDims : public ::testing::TestWithParam<DimCase> {};

TEST_P(HeadDims, MatchTheCpuReference) {
  const DimCase& c = GetParam();
  if (c.coopMat && !runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    GTEST_SKIP() << "the device has no cooperative matrices";
  }
  AttentionResult r;
  try {
    r = c.rope ? runFlash(c.shape, c.options, RopeSpec{}) : runFlash(c.shape, c.options);
  } catch (const UnsupportedError& e) {
    // Only a prefill whose smallest tile's staging exceeds the device's shared memory may refuse.
    ASSERT_EQ(c.shape.qLen > 1, true) << e.what();
    ASSERT_NE(std::string(e.what()).find("no prefill tile for head_dim"), std::string::npos) << e.what();
    GTEST_SKIP() << e.what();
  }
  EXPECT_TRUE(matchesReference(c.shape, r)) << r.record.plan.describe();
  EXPECT_EQ(r.record.plan.decode ? r.record.plan.decodeVariant.headDim : r.record.plan.prefillVariant.headDim,
            c.shape.headDim);
}

std::string caseName(const ::testing::TestParamInfo<DimCase>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Every, HeadDims, ::testing::ValuesIn(cases()), caseName);

}  // namespace
}  // namespace foundry::test
